import type { Concerned, LayerState } from './sqsFaultState.js';
import {
  answer,
  type BatchEntry,
  entriesOf,
  INTERNAL_ERROR,
  jsonBody,
  parseReply,
  type Reply,
  relay,
  type SqsCall,
  withBody,
} from './sqsFaultWire.js';

/**
 * DeleteMessage and DeleteMessageBatch through the layer: `stale-receipt` answers success without
 * deleting; `lose-delete-response` deletes and answers a 500. A copy's receipt handle (`duplicate`)
 * settles its message: it is forwarded as the original's, and deleting a settled message again
 * (either handle) succeeds, as SQS answers for a handle it issued.
 */
export async function deleteMessages(s: LayerState, call: SqsCall): Promise<void> {
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
export async function changeVisibility(s: LayerState, call: SqsCall): Promise<void> {
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
