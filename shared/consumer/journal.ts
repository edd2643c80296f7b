import type { Logger } from '../logger.js';
import type { DeliveryJournal, InboundMessage, JournalStep } from '../port/types.js';

/**
 * The journal of a delivery's transitions (docs/consumer.md, "Journal"): one structured line per step with the
 * same fields, never the payload. Reading a message's lines in order shows what happened to it,
 * and proves that no ack came before its commit.
 */
export type { JournalStep };

export interface JournalEntry {
  step: JournalStep;
  messageId: string | null;
  eventType: string | null;
  attempt: number;
  redelivered: boolean;
  outcome?: string;
  reason?: string;
  /** Times the message was redriven from the parking lot (absent: never). */
  redrives?: number;
}

export type JournalSink = (entry: JournalEntry) => void;

export class Journal implements DeliveryJournal {
  private readonly sinks: JournalSink[] = [];

  constructor(private readonly logger?: Logger) {}

  /** Adds a sink (tests, the lab); the logger line is always written. */
  addSink(sink: JournalSink): () => void {
    this.sinks.push(sink);
    return () => {
      const i = this.sinks.indexOf(sink);
      if (i >= 0) this.sinks.splice(i, 1);
    };
  }

  /** Records a step of `message` (its id, type, attempt and redelivered flag). */
  recordMessage(
    step: JournalStep,
    message: InboundMessage | undefined,
    outcome?: string,
    reason?: string,
  ): void {
    this.record({
      step,
      messageId: message?.messageId ?? null,
      eventType: message?.type ?? null,
      attempt: message?.attempt ?? 0,
      redelivered: message?.redelivered ?? false,
      ...(outcome ? { outcome } : {}),
      ...(reason ? { reason } : {}),
      ...(message?.redrive ? { redrives: message.redrive.count } : {}),
    });
  }

  record(entry: JournalEntry): void {
    this.logger?.info('journal', { journal: entry });
    for (const sink of this.sinks) sink(entry);
  }
}
