import type { JournalLine, JournalRecorder } from '../../devkit/journalRecorder.js';
import type { RawMessage } from '../../devkit/rawMessages.js';
import type { Envelope } from '../../shared/envelope/envelope.js';
import type { OutboxRelay } from '../../shared/outbox/OutboxRelay.js';
import type { Publisher } from '../../shared/port/types.js';
import type { ParkedSummary, TimelineKind } from '../types.js';
import type { ChildProcesses } from './ChildProcesses.js';
import type { ConsumerSide } from './ConsumerSide.js';
import type { DatabaseControls } from './DatabaseControls.js';
import type { PeerConsumer } from './PeerConsumer.js';
import type { ProducerSide } from './ProducerSide.js';
import type { RunJournal } from './RunJournal.js';
import type { ChildOverrides, ConsumerOptions } from './types.js';

/**
 * What the scenarios call on a rig (`rig.placeOrder`, `rig.waitSettled`, ...), each delegated to
 * the part whose job it is.
 */
export abstract class RigSurface {
  abstract readonly run: RunJournal;
  abstract readonly producer: ProducerSide;
  abstract readonly consumer: ConsumerSide;
  /** A peer configuration's consumer (undefined for ours). */
  abstract readonly peer: PeerConsumer | undefined;
  abstract readonly children: ChildProcesses;
  abstract readonly database: DatabaseControls;

  get recorder(): JournalRecorder {
    return this.run.recorder;
  }
  get journal() {
    return this.run.journal;
  }
  get marks() {
    return this.run.marks;
  }
  get t0(): number {
    return this.run.t0;
  }
  get accepted() {
    return this.run.accepted;
  }
  get uncertain() {
    return this.run.uncertain;
  }
  get faultEndedAt(): number | undefined {
    return this.run.faultEndedAt;
  }
  begin(): void {
    this.run.begin();
  }
  mark(label: string, kind: TimelineKind = 'control'): void {
    this.run.mark(label, kind);
  }
  faultEnded(label: string, at = Date.now()): void {
    this.run.faultEnded(label, at);
  }
  markUncertain(eventIds: Iterable<string>): void {
    this.run.markUncertain(eventIds);
  }
  accept(e: Pick<Envelope, 'id' | 'type' | 'aggregate'>): void {
    this.run.accept(e);
  }
  waitFor<T>(
    check: () => Promise<T> | T,
    message: string,
    options: { timeoutMs?: number; intervalMs?: number } = {},
  ) {
    return this.run.waitFor(check, message, options);
  }
  observe(check: () => Promise<boolean> | boolean, forMs: number): Promise<boolean> {
    return this.run.observe(check, forMs);
  }
  linesOf(messageId: string, step?: JournalLine['step']): JournalLine[] {
    return this.run.linesOf(messageId, step);
  }
  waitForLine(...args: Parameters<RunJournal['waitForLine']>) {
    return this.run.waitForLine(...args);
  }

  get droppedCopies() {
    return this.producer.droppedCopies;
  }
  placeOrder(sku: string, quantity: number) {
    return this.producer.placeOrder(sku, quantity);
  }
  cancelOrder(orderId: string) {
    return this.producer.cancelOrder(orderId);
  }
  outboxEnvelopes(): Promise<Envelope[]> {
    return this.producer.outboxEnvelopes();
  }
  unpublished(): Promise<number> {
    return this.producer.unpublished();
  }
  relay(publisher?: Publisher): OutboxRelay {
    return this.producer.relay(publisher);
  }
  relayLoop(...args: Parameters<ProducerSide['relayLoop']>) {
    return this.producer.relayLoop(...args);
  }
  drainOutbox(publisher?: Publisher): Promise<void> {
    return this.producer.drainOutbox(publisher);
  }
  publish(...envelopes: Envelope[]): Promise<void> {
    return this.producer.publish(...envelopes);
  }
  publishRaw(messages: RawMessage[]): Promise<void> {
    return this.producer.publishRaw(messages);
  }

  /** Starts the configuration's consumer: ours, or a peer's (see `ConsumerSide`, `PeerConsumer`). */
  startConsumer(options: ConsumerOptions = {}): Promise<void> {
    return this.peer ? this.peer.start(options) : this.consumer.start(options);
  }
  /**
   * Waits until these events are settled: ours, each acknowledged `copies` times; a peer's, each
   * committed or parked and its queue idle.
   */
  waitSettled(eventIds: string[], copies = 1): Promise<void> {
    return this.peer
      ? this.peer.waitSettled(eventIds)
      : this.consumer.waitSettled(eventIds, copies);
  }
  /** What is parked: our parking lot with its diagnoses, or a peer's dead-letter queue. */
  parked(limit = 500): Promise<ParkedSummary[]> {
    return this.peer ? this.peer.parked(limit) : this.consumer.parked(limit);
  }
  startConsumerProcess(name: string, options?: ChildOverrides & { concurrency?: number }) {
    return this.children.startConsumer(name, options);
  }
  startRelayProcess(name: string, options?: ChildOverrides) {
    return this.children.startRelay(name, options);
  }

  get failures() {
    return this.database.failures;
  }
  stock(sku: string, available: number) {
    return this.database.stock(sku, available);
  }
  proxiedDb(options?: { statementTimeoutMillis?: number }) {
    return this.database.proxied(options);
  }
}
