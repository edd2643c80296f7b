import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listen } from './httpApi.js';
import {
  type Concerned,
  concernedOf,
  type HeldMessage,
  type LayerState,
  newLayerState,
} from './sqsFaultState.js';
import {
  answer,
  answerThrottle,
  type BatchEntry,
  entriesOf,
  eventIdOf,
  fail,
  INTERNAL_ERROR,
  jsonBody,
  operationOf,
  parseJson,
  parseReply,
  type Reply,
  relay,
  type SqsCall,
  type SqsMessage,
  withBody,
} from './sqsFaultWire.js';

/**
 * A behaviour of real SQS queues that emulators never show (docs/sqs-faults.md gives the AWS text
 * for each). `count` is how many times it acts before it disarms itself (default 1); `throttle`
 * lasts `forMs`; `hold-send` stays armed until disarmed.
 */
export type SqsFault =
  | { kind: 'duplicate'; count?: number }
  | { kind: 'reorder'; count?: number; holdMs?: number }
  | { kind: 'partial-batch'; count?: number }
  | {
      kind: 'throttle';
      forMs: number;
      error?: SqsThrottleError;
      /** Operation names (`SendMessageBatch`, `ReceiveMessage`); all when absent. */
      operations?: string[];
    }
  | { kind: 'lose-delete-response'; count?: number }
  | { kind: 'stale-receipt'; count?: number }
  | { kind: 'hold-send' };
export type SqsFaultKind = SqsFault['kind'];
export type SqsThrottleError = 'ThrottlingException' | 'RequestThrottled' | 'http-500' | 'http-503';

/** One action of the layer, for timelines and counts. */
export interface SqsFaultEvent {
  /** Epoch ms. */
  at: number;
  kind: SqsFaultKind;
  detail: string;
  /** The SQS MessageIds concerned (none for entries that were never enqueued). */
  messageIds: string[];
  /** The `id` of each concerned message whose body is JSON with a string `id` (our envelopes). */
  eventIds: string[];
}

export interface SqsFaultLayer {
  /** Give this to SQS clients instead of the upstream endpoint. */
  readonly endpoint: string;
  /** Arms a behaviour; several may be armed at once. Arming a kind again replaces it. */
  arm(fault: SqsFault): void;
  /** Disarms one kind, or all. Held answers (`hold-send`, `reorder`) stay held. */
  disarm(kind?: SqsFaultKind): void;
  /** What the layer did, in order. */
  readonly events: readonly SqsFaultEvent[];
  /** How many times a behaviour acted (its events). */
  count(kind: SqsFaultKind): number;
  /** `hold-send`: answers every held response now. */
  releaseHeld(): Promise<void>;
  /** `hold-send`: destroys the held connections unanswered (the sender died). */
  dropHeld(): void;
  close(): Promise<void>;
}

/**
 * An HTTP reverse proxy between SQS clients and any SQS endpoint (fauxqs, moto) that reproduces
 * what real queues do and emulators never do: duplicates, reordering across receives, partial
 * batch failures, throttling, lost delete answers, deletes with a stale receipt handle, and send
 * answers that never arrive. Everything passes through unchanged until a behaviour is armed.
 *
 * It understands the AWS JSON 1.0 protocol (`X-Amz-Target: AmazonSQS.<Operation>`, what SDK v3
 * clients speak); other requests (the query protocol) always pass through. It rewrites request
 * bodies, so it only suits endpoints that do not check SigV4 signatures (every local emulator).
 */
export async function startSqsFaultLayer(
  upstream: string,
  options: { random?: () => number } = {},
): Promise<SqsFaultLayer> {
  const state = newLayerState(upstream, options.random ?? Math.random);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      route(state, req, res, Buffer.concat(chunks)).catch((err: unknown) => fail(res, err));
    });
  });
  const { port } = await listen(server);
  return {
    endpoint: `http://127.0.0.1:${port}`,
    events: state.log.events,
    arm: (fault) => state.faults.arm(fault),
    disarm(kind) {
      state.faults.disarm(kind);
      // a copy not yet delivered never happened
      if (!kind || kind === 'duplicate') state.duplicates.waiting.clear();
    },
    count: (kind) => state.log.count(kind),
    releaseHeld: () => state.heldSends.release(),
    dropHeld: () => state.heldSends.drop(),
    async close() {
      state.heldSends.drop();
      await closeServer(server);
    },
  };
}

/** Each JSON-protocol call to what acts on its operation; a throttled call goes no further. */
async function route(
  s: LayerState,
  req: IncomingMessage,
  res: ServerResponse,
  body: Buffer,
): Promise<void> {
  const op = operationOf(req);
  const input = op ? parseJson(body) : undefined;
  if (!op || !input) return s.upstream.passThrough(req, res, body);
  const call: SqsCall = { req, res, op, body, input };
  const error = s.faults.throttled(op);
  if (error) {
    s.log.record('throttle', `${op} answered ${error}, not forwarded`, concernedBy(s, call));
    return answerThrottle(res, error);
  }
  switch (op) {
    case 'ReceiveMessage':
      return receive(s, call);
    case 'SendMessage':
    case 'SendMessageBatch':
      return sendMessages(s, call);
    case 'DeleteMessage':
    case 'DeleteMessageBatch':
      return deleteMessages(s, call);
    case 'ChangeMessageVisibility':
    case 'ChangeMessageVisibilityBatch':
      return changeVisibility(s, call);
    default:
      return s.upstream.passThrough(req, res, body);
  }
}

/** The messages a (throttled) call names: sent bodies' ids, or the handles' messages. */
function concernedBy(s: LayerState, { op, input }: SqsCall): Concerned {
  const entries = entriesOf(input);
  if (op === 'SendMessage') return { messageIds: [], eventIds: [eventIdOf(input.MessageBody)] };
  if (op === 'SendMessageBatch') {
    return { messageIds: [], eventIds: entries.map((e) => eventIdOf(e.MessageBody)) };
  }
  const receiptHandles = [input.ReceiptHandle, ...entries.map((e) => e.ReceiptHandle)];
  return s.handles.messagesOf(receiptHandles.map((h) => (typeof h === 'string' ? h : undefined)));
}

const DEFAULT_HOLD_MS = 500;

/**
 * ReceiveMessage through the layer: `reorder` reverses an answer or holds its single message back
 * for a later one; `duplicate` delivers a second copy of a message with the next receive.
 * FIFO queues are never reordered or duplicated.
 */
async function receive(s: LayerState, call: SqsCall): Promise<void> {
  const url = String(call.input.QueueUrl ?? '');
  const held = s.held.of(url);
  const copies = s.duplicates.waiting.of(url);
  const max = Math.min(10, Math.max(1, Number(call.input.MaxNumberOfMessages ?? 1) || 1));
  const now = Date.now();
  // a message held longer than its holdMs comes back alone, on this receive
  if (held.some(isOverdue(now))) {
    return answer(call.res, 200, { Messages: held.splice(0, max).map((h) => h.message) });
  }
  const reply = await s.upstream.forward(call.req, receiveBody(call, held, copies, now));
  const out = parseReply(reply);
  if (!out) return relay(call.res, reply);
  const received = ((out.Messages as SqsMessage[] | undefined) ?? []).slice();
  for (const m of received) s.handles.remember(m);
  const standard = !url.endsWith('.fifo');
  const { messages, newlyHeld, reordered } = standard
    ? reorder(s, received, held)
    : { messages: received, newlyHeld: undefined, reordered: false };
  // earlier held messages come after this answer's own messages (or alone once their holdMs
  // has passed), then copies, within MaxNumberOfMessages
  const heldAdded = addHeld(messages, held, max);
  if (newlyHeld) held.push(newlyHeld);
  const delivered = messages.slice();
  const copiesAdded = addCopies(s, messages, copies, max);
  if (standard) duplicateOne(s, delivered, copies);
  if (!reordered && !heldAdded && !copiesAdded) return relay(call.res, reply);
  return relay(call.res, withMessages(reply, out, messages));
}

const isOverdue = (now: number) => (h: HeldMessage) => now - h.since >= h.holdMs;

/** The request as sent upstream: something waits for this answer, so a long poll must not sit on it. */
function receiveBody(
  call: SqsCall,
  held: HeldMessage[],
  copies: SqsMessage[],
  now: number,
): Buffer {
  const wait = Number(call.input.WaitTimeSeconds ?? 0);
  if (!(wait > 0 && (copies.length > 0 || held.length > 0))) return call.body;
  const remaining = Math.min(...held.map((h) => h.since + h.holdMs - now));
  const shorter = copies.length > 0 ? 0 : Math.min(wait, Math.ceil(remaining / 1000));
  return jsonBody({ ...call.input, WaitTimeSeconds: shorter });
}

/** `reorder` on the upstream answer: reversed, or its single message held for a later answer. */
function reorder(
  s: LayerState,
  messages: SqsMessage[],
  held: HeldMessage[],
): { messages: SqsMessage[]; newlyHeld: HeldMessage | undefined; reordered: boolean } {
  if (messages.length >= 2 && s.faults.take('reorder')) {
    messages.reverse();
    const detail = `receive answer of ${messages.length} returned in reverse order`;
    s.log.record('reorder', detail, concernedOf(messages));
    return { messages, newlyHeld: undefined, reordered: true };
  }
  const fault = messages.length === 1 && held.length === 0 ? s.faults.take('reorder') : undefined;
  if (!fault) return { messages, newlyHeld: undefined, reordered: false };
  const m = messages[0] as SqsMessage;
  const holdMs = fault.holdMs ?? DEFAULT_HOLD_MS;
  const newlyHeld = { message: m, since: Date.now(), holdMs };
  s.log.record(
    'reorder',
    `single message held back: delivered after the next answer's messages, or alone after ${holdMs} ms`,
    concernedOf([m]),
  );
  return { messages: [], newlyHeld, reordered: true };
}

/** Adds held messages after the answer's own (alone once overdue); true when it added any. */
function addHeld(messages: SqsMessage[], held: HeldMessage[], max: number): boolean {
  const overdue = isOverdue(Date.now());
  const own = messages.length;
  let added = false;
  while (messages.length < max && held.length > 0 && (own > 0 || overdue(held[0] as HeldMessage))) {
    messages.push((held.shift() as HeldMessage).message);
    added = true;
  }
  return added;
}

/** Adds the copies waiting for this queue; true when it added any. */
function addCopies(s: LayerState, messages: SqsMessage[], copies: SqsMessage[], max: number) {
  let added = false;
  while (messages.length < max && copies.length > 0) {
    const copy = copies.shift() as SqsMessage;
    messages.push(copy);
    added = true;
    const firstGone = s.duplicates.pairOf(copy.ReceiptHandle)?.deleted;
    s.log.record(
      'duplicate',
      `second copy delivered with a new receipt handle${firstGone ? ' (first copy already deleted)' : ''}`,
      concernedOf([copy]),
    );
  }
  return added;
}

/** `duplicate`: one message of this answer gets a copy, which goes out with the next receive. */
function duplicateOne(s: LayerState, delivered: SqsMessage[], copies: SqsMessage[]): void {
  if (delivered.length === 0 || copies.length > 0 || !s.faults.take('duplicate')) return;
  const m = delivered[Math.min(delivered.length - 1, Math.floor(s.random() * delivered.length))];
  const copy = m ? s.duplicates.copyOf(m) : undefined;
  if (!copy) return;
  s.handles.remember(copy);
  copies.push(copy);
}

function withMessages(reply: Reply, out: Record<string, unknown>, messages: SqsMessage[]): Reply {
  const result: Record<string, unknown> = { ...out, Messages: messages };
  if (messages.length === 0) delete result.Messages;
  return withBody(reply, result);
}

/** The code a layer-failed batch entry carries: SQS's documented 500 (API Reference, Common Errors). */
export const FAILED_ENTRY_CODE = 'InternalFailure';

/**
 * SendMessage and SendMessageBatch through the layer: `partial-batch` leaves every second entry
 * of a batch out and reports it Failed; `hold-send` forwards the call and holds its answer.
 */
async function sendMessages(s: LayerState, call: SqsCall): Promise<void> {
  const entries = entriesOf(call.input);
  const dropped = partialBatch(s, call.op, entries);
  const kept = entries.filter((e) => !dropped.includes(e));
  const sent = dropped.length > 0 ? jsonBody({ ...call.input, Entries: kept }) : call.body;
  const hold = s.faults.isArmed('hold-send');
  let reply = await s.upstream.forward(call.req, sent);
  const out = parseReply(reply);
  if (dropped.length > 0) reply = reportDropped(s, reply, out, entries.length, dropped);
  if (!hold) return relay(call.res, reply);
  holdAnswer(s, call, reply, out, kept);
}

/** `partial-batch`: the entries left out of a batch of 2 or more (every second one). */
function partialBatch(s: LayerState, op: string, entries: BatchEntry[]): BatchEntry[] {
  if (op !== 'SendMessageBatch' || entries.length < 2 || !s.faults.take('partial-batch')) return [];
  return entries.filter((_, i) => i % 2 === 1);
}

/** The answer with the entries left out added to its `Failed`, as SQS reports a failed entry. */
function reportDropped(
  s: LayerState,
  reply: Reply,
  out: Record<string, unknown> | undefined,
  total: number,
  dropped: BatchEntry[],
): Reply {
  const failed = dropped.map((e) => ({
    Id: e.Id,
    SenderFault: false,
    Code: FAILED_ENTRY_CODE,
    Message: 'The request processing has failed because of an unknown error.',
  }));
  const reported = out
    ? withBody(reply, {
        ...out,
        Failed: [...((out.Failed as unknown[] | undefined) ?? []), ...failed],
      })
    : reply;
  s.log.record(
    'partial-batch',
    `${dropped.length} of ${total} entries not enqueued, reported Failed (${FAILED_ENTRY_CODE})` +
      (out ? '' : `; the call itself failed upstream (HTTP ${reply.status})`),
    { messageIds: [], eventIds: dropped.map((e) => eventIdOf(e.MessageBody)) },
  );
  return reported;
}

/** `hold-send`: the answer waits in the layer (released or dropped later). */
function holdAnswer(
  s: LayerState,
  call: SqsCall,
  reply: Reply,
  out: Record<string, unknown> | undefined,
  kept: BatchEntry[],
): void {
  s.heldSends.hold(call.res, reply);
  const single = call.op === 'SendMessage';
  const messageIds = single
    ? [out?.MessageId as string | undefined]
    : ((out?.Successful as { MessageId?: string }[] | undefined) ?? []).map((x) => x.MessageId);
  const bodies = single ? [call.input.MessageBody] : kept.map((e) => e.MessageBody);
  s.log.record('hold-send', `${call.op} forwarded (HTTP ${reply.status}), its answer held`, {
    messageIds: messageIds.filter((id): id is string => typeof id === 'string'),
    eventIds: bodies.map(eventIdOf),
  });
}

/**
 * DeleteMessage and DeleteMessageBatch through the layer: `stale-receipt` answers success without
 * deleting; `lose-delete-response` deletes and answers a 500. A copy's receipt handle (`duplicate`)
 * settles its message: it is forwarded as the original's, and deleting a settled message again
 * (either handle) succeeds, as SQS answers for a handle it issued.
 */
async function deleteMessages(s: LayerState, call: SqsCall): Promise<void> {
  const batch = call.op === 'DeleteMessageBatch';
  const entries: BatchEntry[] = batch
    ? entriesOf(call.input)
    : [{ ReceiptHandle: call.input.ReceiptHandle as string | undefined }];
  const concerned = s.handles.messagesOf(entries.map((e) => e.ReceiptHandle));
  if (s.faults.take('stale-receipt')) return answerStale(s, call, entries, concerned);
  const settledHere = entries.filter((e) => s.duplicates.pairOf(e.ReceiptHandle)?.deleted);
  const onward = entries
    .filter((e) => !settledHere.includes(e))
    .map((e) => {
      const pair = s.duplicates.pairOf(e.ReceiptHandle);
      return pair ? { ...e, ReceiptHandle: pair.original } : e;
    });
  if (onward.length === 0) return answer(call.res, 200, succeeded(batch, entries));
  const sent = deleteBody(call, entries, onward, settledHere);
  const lose = s.faults.take('lose-delete-response') !== undefined;
  const reply = settleCopies(
    s,
    batch,
    entries,
    settledHere,
    await s.upstream.forward(call.req, sent),
  );
  if (!lose) return relay(call.res, reply);
  s.log.record(
    'lose-delete-response',
    `${call.op} forwarded (HTTP ${reply.status}), the client got a 500 InternalError instead`,
    concerned,
  );
  return answer(call.res, 500, INTERNAL_ERROR, {});
}

/** SQS's answer to a delete that succeeded for every entry. */
function succeeded(batch: boolean, entries: BatchEntry[]) {
  return batch ? { Successful: entries.map((e) => ({ Id: e.Id })), Failed: [] } : {};
}

/** `stale-receipt`: the delete is answered success and not forwarded: the messages stay. */
function answerStale(
  s: LayerState,
  call: SqsCall,
  entries: BatchEntry[],
  concerned: Concerned,
): Promise<void> {
  s.log.record(
    'stale-receipt',
    `${call.op} of ${entries.length} answered success, not forwarded: the messages stay`,
    concerned,
  );
  return answer(call.res, 200, succeeded(call.op === 'DeleteMessageBatch', entries));
}

/** The request as sent upstream: copies' handles replaced, settled entries left out. */
function deleteBody(
  call: SqsCall,
  entries: BatchEntry[],
  onward: BatchEntry[],
  settledHere: BatchEntry[],
): Buffer {
  const rewritten = settledHere.length > 0 || onward.some((e, i) => e !== entries[i]);
  if (!rewritten) return call.body;
  return jsonBody(
    call.op === 'DeleteMessageBatch'
      ? { ...call.input, Entries: onward }
      : { ...call.input, ReceiptHandle: onward[0]?.ReceiptHandle },
  );
}

/** Marks the copies the upstream deleted; a batch's answer also names the entries settled here. */
function settleCopies(
  s: LayerState,
  batch: boolean,
  entries: BatchEntry[],
  settledHere: BatchEntry[],
  reply: Reply,
): Reply {
  const out = parseReply(reply);
  if (!out) return reply;
  const successful = (out.Successful as { Id?: string }[] | undefined) ?? [];
  const ok = new Set(batch ? successful.map((x) => x.Id) : [undefined]);
  for (const e of entries) {
    const pair = s.duplicates.pairOf(e.ReceiptHandle);
    if (pair && ok.has(e.Id)) pair.deleted = true;
  }
  if (!batch || settledHere.length === 0) return reply;
  return withBody(reply, {
    ...out,
    Successful: [...successful, ...settledHere.map((e) => ({ Id: e.Id }))],
  });
}

/** ChangeMessageVisibility(Batch) through the layer: a copy's handle goes on as the original's. */
async function changeVisibility(s: LayerState, call: SqsCall): Promise<void> {
  relay(call.res, await s.upstream.forward(call.req, visibilityBody(s, call)));
}

function visibilityBody(s: LayerState, call: SqsCall): Buffer {
  const original = (h: unknown) => s.duplicates.originalOf(h);
  if (call.op === 'ChangeMessageVisibilityBatch') {
    const entries = entriesOf(call.input);
    if (!entries.some((e) => original(e.ReceiptHandle))) return call.body;
    const mapped = entries.map((e) => ({
      ...e,
      ReceiptHandle: original(e.ReceiptHandle) ?? e.ReceiptHandle,
    }));
    return jsonBody({ ...call.input, Entries: mapped });
  }
  const handle = original(call.input.ReceiptHandle);
  return handle ? jsonBody({ ...call.input, ReceiptHandle: handle }) : call.body;
}
