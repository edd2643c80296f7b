import type { LayerState } from './sqsFaultState.js';
import {
  type BatchEntry,
  entriesOf,
  eventIdOf,
  jsonBody,
  parseReply,
  type Reply,
  relay,
  type SqsCall,
  withBody,
} from './sqsFaultWire.js';

/** The code a layer-failed batch entry carries: SQS's documented 500 (API Reference, Common Errors). */
export const FAILED_ENTRY_CODE = 'InternalFailure';

/**
 * SendMessage and SendMessageBatch through the layer: `partial-batch` leaves every second entry
 * of a batch out and reports it Failed; `hold-send` forwards the call and holds its answer.
 */
export async function sendMessages(s: LayerState, call: SqsCall): Promise<void> {
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
