import { concernedOf, type HeldMessage, type LayerState } from './sqsFaultState.js';
import {
  answer,
  jsonBody,
  parseReply,
  type Reply,
  relay,
  type SqsCall,
  type SqsMessage,
  withBody,
} from './sqsFaultWire.js';

const DEFAULT_HOLD_MS = 500;

/**
 * ReceiveMessage through the layer: `reorder` reverses an answer or holds its single message back
 * for a later one; `duplicate` delivers a second copy of a message with the next receive.
 * FIFO queues are never reordered or duplicated.
 */
export async function receive(s: LayerState, call: SqsCall): Promise<void> {
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
