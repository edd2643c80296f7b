import { randomUUID } from 'node:crypto';
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo } from 'node:net';

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

/** The code a layer-failed batch entry carries: SQS's documented 500 (API Reference, Common Errors). */
export const FAILED_ENTRY_CODE = 'InternalFailure';

const JSON_TYPE = 'application/x-amz-json-1.0';
const DEFAULT_HOLD_MS = 500;
const REMEMBERED_HANDLES = 20_000;

interface SqsMessage {
  MessageId?: string;
  ReceiptHandle?: string;
  Body?: string;
  Attributes?: Record<string, string>;
  [key: string]: unknown;
}

interface BatchEntry {
  Id?: string;
  ReceiptHandle?: string;
  MessageBody?: string;
  [key: string]: unknown;
}

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** The two receipt handles of a duplicated message: either settles it. */
interface Copy {
  messageId: string;
  original: string;
  deleted: boolean;
}

interface HeldMessage {
  message: SqsMessage;
  since: number;
  holdMs: number;
}

interface QueueState {
  /** Copies (new receipt handles) waiting for the next receive. */
  copies: SqsMessage[];
  /** `reorder`: single messages held back from an answer. */
  held: HeldMessage[];
}

interface HeldSend {
  res: ServerResponse;
  reply: Reply;
}

type Armed = { [K in SqsFaultKind]?: Extract<SqsFault, { kind: K }> & { left: number } } & {
  throttle?: { until: number };
};

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
  const target = new URL(upstream);
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  const random = options.random ?? Math.random;
  const armed: Armed = {};
  const events: SqsFaultEvent[] = [];
  const queues = new Map<string, QueueState>();
  /** Receipt handle → the message it was issued for (every receive answer is read). */
  const handles = new Map<string, { messageId: string; eventId?: string }>();
  /** Receipt handle (either copy's) → the duplicated message. */
  const copies = new Map<string, Copy>();
  const heldSends: HeldSend[] = [];

  const record = (
    kind: SqsFaultKind,
    detail: string,
    messageIds: string[],
    eventIds: (string | undefined)[],
  ) => {
    events.push({
      at: Date.now(),
      kind,
      detail,
      messageIds,
      eventIds: eventIds.filter((id): id is string => id !== undefined),
    });
  };

  /** Takes one action of a counted behaviour if it is armed; it disarms itself at zero. */
  const take = <K extends Exclude<SqsFaultKind, 'throttle' | 'hold-send'>>(kind: K) => {
    const fault = armed[kind];
    if (!fault) return undefined;
    fault.left -= 1;
    if (fault.left <= 0) delete armed[kind];
    return fault;
  };

  const queueState = (key: string): QueueState => {
    let state = queues.get(key);
    if (!state) {
      state = { copies: [], held: [] };
      queues.set(key, state);
    }
    return state;
  };

  const rememberHandle = (m: SqsMessage) => {
    if (!m.ReceiptHandle || !m.MessageId) return;
    handles.set(m.ReceiptHandle, { messageId: m.MessageId, eventId: eventIdOf(m.Body) });
    if (handles.size > REMEMBERED_HANDLES) {
      const oldest = handles.keys().next().value;
      if (oldest !== undefined) handles.delete(oldest);
    }
  };

  const messagesOfHandles = (receiptHandles: (string | undefined)[]) => {
    const known = receiptHandles
      .map((h) => (h ? handles.get(h) : undefined))
      .filter((m) => m !== undefined);
    return { messageIds: known.map((m) => m.messageId), eventIds: known.map((m) => m.eventId) };
  };

  /** Sends `body` upstream as the client's request and buffers the answer. */
  const forward = (req: IncomingMessage, body: Buffer): Promise<Reply> =>
    new Promise((resolve, reject) => {
      const headers: IncomingHttpHeaders = { ...req.headers, host: target.host };
      delete headers['transfer-encoding'];
      headers['content-length'] = String(body.length);
      // the layer reads the answer: ask for it uncompressed
      headers['accept-encoding'] = 'identity';
      const up = send(
        {
          protocol: target.protocol,
          hostname: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 502,
              headers: res.headers,
              body: Buffer.concat(chunks),
            }),
          );
          res.on('error', reject);
        },
      );
      up.on('error', reject);
      up.end(body);
    });

  const receive = async (
    req: IncomingMessage,
    res: ServerResponse,
    body: Buffer,
    input: Record<string, unknown>,
  ) => {
    const url = String(input.QueueUrl ?? '');
    const state = queueState(queueKey(url));
    const max = Math.min(10, Math.max(1, Number(input.MaxNumberOfMessages ?? 1) || 1));
    const now = Date.now();
    // a message held longer than its holdMs comes back alone, on this receive
    if (state.held.some((h) => now - h.since >= h.holdMs)) {
      const back = state.held.splice(0, max).map((h) => h.message);
      return answer(res, 200, { Messages: back });
    }
    // something waits for this answer: a long poll must not sit on it
    let sent = body;
    const wait = Number(input.WaitTimeSeconds ?? 0);
    if (wait > 0 && (state.copies.length > 0 || state.held.length > 0)) {
      const remaining = Math.min(...state.held.map((h) => h.since + h.holdMs - now));
      const shorter = state.copies.length > 0 ? 0 : Math.min(wait, Math.ceil(remaining / 1000));
      sent = Buffer.from(JSON.stringify({ ...input, WaitTimeSeconds: shorter }));
    }
    const reply = await forward(req, sent);
    const out = parseReply(reply);
    if (!out) return relay(res, reply);
    let messages = ((out.Messages as SqsMessage[] | undefined) ?? []).slice();
    for (const m of messages) rememberHandle(m);
    const standard = !url.endsWith('.fifo');
    let changed = false;

    // reorder the upstream answer: reversed, or its single message held for a later answer
    let newlyHeld: HeldMessage | undefined;
    if (standard && messages.length >= 2 && armed.reorder) {
      take('reorder');
      messages.reverse();
      changed = true;
      record(
        'reorder',
        `receive answer of ${messages.length} returned in reverse order`,
        messages.map((m) => m.MessageId ?? ''),
        messages.map((m) => eventIdOf(m.Body)),
      );
    } else if (standard && messages.length === 1 && state.held.length === 0 && armed.reorder) {
      const fault = take('reorder');
      const m = messages[0] as SqsMessage;
      const holdMs = fault?.holdMs ?? DEFAULT_HOLD_MS;
      newlyHeld = { message: m, since: Date.now(), holdMs };
      messages = [];
      changed = true;
      record(
        'reorder',
        `single message held back: delivered after the next answer's messages, or alone after ${holdMs} ms`,
        [m.MessageId ?? ''],
        [eventIdOf(m.Body)],
      );
    }
    // earlier held messages come after this answer's own messages (or alone once their holdMs
    // has passed), then copies, within MaxNumberOfMessages
    const answered = Date.now();
    const own = messages.length;
    while (
      messages.length < max &&
      state.held.length > 0 &&
      (own > 0 ||
        answered - (state.held[0] as HeldMessage).since >= (state.held[0] as HeldMessage).holdMs)
    ) {
      messages.push((state.held.shift() as HeldMessage).message);
      changed = true;
    }
    if (newlyHeld) state.held.push(newlyHeld);
    const delivered = messages.slice();
    while (messages.length < max && state.copies.length > 0) {
      const copy = state.copies.shift() as SqsMessage;
      messages.push(copy);
      changed = true;
      const pair = copies.get(copy.ReceiptHandle ?? '');
      record(
        'duplicate',
        `second copy delivered with a new receipt handle${pair?.deleted ? ' (first copy already deleted)' : ''}`,
        [copy.MessageId ?? ''],
        [eventIdOf(copy.Body)],
      );
    }
    // remember one message of this answer: its copy goes out with the next receive
    if (standard && delivered.length > 0 && state.copies.length === 0 && armed.duplicate) {
      take('duplicate');
      const m = delivered[Math.min(delivered.length - 1, Math.floor(random() * delivered.length))];
      if (m?.ReceiptHandle && m.MessageId) {
        const handle = `${randomUUID()}-fault-copy`;
        const pair: Copy = { messageId: m.MessageId, original: m.ReceiptHandle, deleted: false };
        copies.set(m.ReceiptHandle, pair);
        copies.set(handle, pair);
        const copy: SqsMessage = { ...m, ReceiptHandle: handle };
        const receiveCount = m.Attributes?.ApproximateReceiveCount;
        if (m.Attributes && receiveCount !== undefined) {
          copy.Attributes = {
            ...m.Attributes,
            ApproximateReceiveCount: String(Number(receiveCount) + 1),
          };
        }
        rememberHandle(copy);
        state.copies.push(copy);
      }
    }
    if (!changed) return relay(res, reply);
    const result: Record<string, unknown> = { ...out, Messages: messages };
    if (messages.length === 0) delete result.Messages;
    return relay(res, withBody(reply, result));
  };

  const sendMessages = async (
    req: IncomingMessage,
    res: ServerResponse,
    op: string,
    body: Buffer,
    input: Record<string, unknown>,
  ) => {
    const entries = (input.Entries as BatchEntry[] | undefined) ?? [];
    let sent = body;
    let dropped: BatchEntry[] = [];
    if (op === 'SendMessageBatch' && entries.length >= 2 && armed['partial-batch']) {
      take('partial-batch');
      dropped = entries.filter((_, i) => i % 2 === 1);
      const kept = entries.filter((_, i) => i % 2 === 0);
      sent = Buffer.from(JSON.stringify({ ...input, Entries: kept }));
    }
    const hold = armed['hold-send'] !== undefined;
    let reply = await forward(req, sent);
    const out = parseReply(reply);
    if (dropped.length > 0) {
      if (out) {
        const failed = dropped.map((e) => ({
          Id: e.Id,
          SenderFault: false,
          Code: FAILED_ENTRY_CODE,
          Message: 'The request processing has failed because of an unknown error.',
        }));
        reply = withBody(reply, {
          ...out,
          Failed: [...((out.Failed as unknown[] | undefined) ?? []), ...failed],
        });
      }
      record(
        'partial-batch',
        `${dropped.length} of ${entries.length} entries not enqueued, reported Failed (${FAILED_ENTRY_CODE})` +
          (out ? '' : `; the call itself failed upstream (HTTP ${reply.status})`),
        [],
        dropped.map((e) => eventIdOf(e.MessageBody)),
      );
    }
    if (!hold) return relay(res, reply);
    heldSends.push({ res, reply });
    const messageIds =
      op === 'SendMessage'
        ? [out?.MessageId as string | undefined]
        : ((out?.Successful as { MessageId?: string }[] | undefined) ?? []).map((s) => s.MessageId);
    const sentBodies =
      op === 'SendMessage'
        ? [input.MessageBody]
        : entries.filter((e) => !dropped.includes(e)).map((e) => e.MessageBody);
    record(
      'hold-send',
      `${op} forwarded (HTTP ${reply.status}), its answer held`,
      messageIds.filter((id): id is string => typeof id === 'string'),
      sentBodies.map(eventIdOf),
    );
  };

  const deleteMessages = async (
    req: IncomingMessage,
    res: ServerResponse,
    op: string,
    body: Buffer,
    input: Record<string, unknown>,
  ) => {
    const batch = op === 'DeleteMessageBatch';
    const entries: BatchEntry[] = batch
      ? ((input.Entries as BatchEntry[] | undefined) ?? [])
      : [{ ReceiptHandle: input.ReceiptHandle as string | undefined }];
    const succeeded = (list: BatchEntry[]) =>
      batch ? { Successful: list.map((e) => ({ Id: e.Id })), Failed: [] } : {};
    const concerned = messagesOfHandles(entries.map((e) => e.ReceiptHandle));

    if (armed['stale-receipt']) {
      take('stale-receipt');
      record(
        'stale-receipt',
        `${op} of ${entries.length} answered success, not forwarded: the messages stay`,
        concerned.messageIds,
        concerned.eventIds,
      );
      return answer(res, 200, succeeded(entries));
    }
    // a copy's handle settles the message: forwarded with the original handle; once deleted,
    // deleting it again (either handle) succeeds, as SQS answers for a handle it issued
    const settledHere = entries.filter((e) => copies.get(e.ReceiptHandle ?? '')?.deleted);
    const onward = entries
      .filter((e) => !settledHere.includes(e))
      .map((e) => {
        const pair = copies.get(e.ReceiptHandle ?? '');
        return pair ? { ...e, ReceiptHandle: pair.original } : e;
      });
    if (onward.length === 0) return answer(res, 200, succeeded(entries));
    const rewritten = settledHere.length > 0 || onward.some((e, i) => e !== entries[i]);
    const sent = !rewritten
      ? body
      : Buffer.from(
          JSON.stringify(
            batch
              ? { ...input, Entries: onward }
              : { ...input, ReceiptHandle: onward[0]?.ReceiptHandle },
          ),
        );
    const lose = armed['lose-delete-response'] !== undefined;
    if (lose) take('lose-delete-response');
    let reply = await forward(req, sent);
    const out = parseReply(reply);
    if (out) {
      const ok = new Set(
        batch
          ? ((out.Successful as { Id?: string }[] | undefined) ?? []).map((s) => s.Id)
          : [undefined],
      );
      for (const e of entries) {
        const pair = copies.get(e.ReceiptHandle ?? '');
        if (pair && ok.has(e.Id)) pair.deleted = true;
      }
      if (batch && settledHere.length > 0) {
        reply = withBody(reply, {
          ...out,
          Successful: [
            ...((out.Successful as unknown[] | undefined) ?? []),
            ...settledHere.map((e) => ({ Id: e.Id })),
          ],
        });
      }
    }
    if (!lose) return relay(res, reply);
    record(
      'lose-delete-response',
      `${op} forwarded (HTTP ${reply.status}), the client got a 500 InternalError instead`,
      concerned.messageIds,
      concerned.eventIds,
    );
    return answer(
      res,
      500,
      { __type: 'InternalError', message: 'We encountered an internal error. Please try again.' },
      {},
    );
  };

  const changeVisibility = async (
    req: IncomingMessage,
    res: ServerResponse,
    op: string,
    body: Buffer,
    input: Record<string, unknown>,
  ) => {
    const original = (h: unknown) => (typeof h === 'string' ? copies.get(h)?.original : undefined);
    let sent = body;
    if (op === 'ChangeMessageVisibilityBatch') {
      const entries = (input.Entries as BatchEntry[] | undefined) ?? [];
      if (entries.some((e) => original(e.ReceiptHandle))) {
        const mapped = entries.map((e) => ({
          ...e,
          ReceiptHandle: original(e.ReceiptHandle) ?? e.ReceiptHandle,
        }));
        sent = Buffer.from(JSON.stringify({ ...input, Entries: mapped }));
      }
    } else if (original(input.ReceiptHandle)) {
      sent = Buffer.from(
        JSON.stringify({ ...input, ReceiptHandle: original(input.ReceiptHandle) }),
      );
    }
    relay(res, await forward(req, sent));
  };

  const throttled = (op: string): SqsThrottleError | undefined => {
    const t = armed.throttle;
    if (!t) return undefined;
    if (Date.now() >= t.until) {
      delete armed.throttle;
      return undefined;
    }
    if (t.operations && !t.operations.includes(op)) return undefined;
    return t.error ?? 'ThrottlingException';
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    const amzTarget = req.headers['x-amz-target'];
    const op = (Array.isArray(amzTarget) ? amzTarget[0] : amzTarget)?.match(
      /^AmazonSQS\.(\w+)$/,
    )?.[1];
    const input = op ? parseJson(body) : undefined;
    if (!op || !input) return passThrough(req, res, body);
    const error = throttled(op);
    if (error) {
      const { messageIds, eventIds } = concernedByRequest(op, input);
      record('throttle', `${op} answered ${error}, not forwarded`, messageIds, eventIds);
      return answerThrottle(res, error);
    }
    switch (op) {
      case 'ReceiveMessage':
        return receive(req, res, body, input);
      case 'SendMessage':
      case 'SendMessageBatch':
        return sendMessages(req, res, op, body, input);
      case 'DeleteMessage':
      case 'DeleteMessageBatch':
        return deleteMessages(req, res, op, body, input);
      case 'ChangeMessageVisibility':
      case 'ChangeMessageVisibilityBatch':
        return changeVisibility(req, res, op, body, input);
      default:
        return passThrough(req, res, body);
    }
  };

  /** The messages a (throttled) request names: sent bodies' ids, or the handles' messages. */
  const concernedByRequest = (op: string, input: Record<string, unknown>) => {
    const entries = (input.Entries as BatchEntry[] | undefined) ?? [];
    if (op === 'SendMessage') return { messageIds: [], eventIds: [eventIdOf(input.MessageBody)] };
    if (op === 'SendMessageBatch') {
      return { messageIds: [], eventIds: entries.map((e) => eventIdOf(e.MessageBody)) };
    }
    const receiptHandles = [input.ReceiptHandle, ...entries.map((e) => e.ReceiptHandle)];
    return messagesOfHandles(receiptHandles.map((h) => (typeof h === 'string' ? h : undefined)));
  };

  /** Unchanged, streamed both ways (what the layer does with everything it does not act on). */
  const passThrough = (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    const up = send(
      {
        protocol: target.protocol,
        hostname: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: target.host },
      },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      },
    );
    up.on('error', (err) => fail(res, err));
    up.end(body);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks)).catch((err: unknown) => fail(res, err));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;

  return {
    endpoint: `http://127.0.0.1:${port}`,
    events,
    arm(fault) {
      switch (fault.kind) {
        case 'throttle':
          if (!(fault.forMs > 0)) throw new RangeError('throttle: forMs must be > 0');
          armed.throttle = { ...fault, left: 0, until: Date.now() + fault.forMs };
          return;
        case 'hold-send':
          armed['hold-send'] = { ...fault, left: 0 };
          return;
        default: {
          const left = fault.count ?? 1;
          if (!Number.isInteger(left) || left < 1) {
            throw new RangeError(`${fault.kind}: count must be a positive integer`);
          }
          if (fault.kind === 'reorder' && fault.holdMs !== undefined && !(fault.holdMs >= 0)) {
            throw new RangeError('reorder: holdMs must be >= 0');
          }
          (armed as Record<string, unknown>)[fault.kind] = { ...fault, left };
        }
      }
    },
    disarm(kind) {
      const kinds = kind ? [kind] : (Object.keys(armed) as SqsFaultKind[]);
      for (const k of kinds) delete armed[k];
      // a copy not yet delivered never happened
      if (!kind || kind === 'duplicate') for (const state of queues.values()) state.copies = [];
    },
    count: (kind) => events.filter((e) => e.kind === kind).length,
    async releaseHeld() {
      const held = heldSends.splice(0);
      await Promise.all(held.map(({ res, reply }) => relay(res, reply)));
    },
    dropHeld() {
      for (const { res } of heldSends.splice(0)) res.socket?.destroy();
    },
    async close() {
      for (const { res } of heldSends.splice(0)) res.socket?.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** A queue by its path (`/000000000000/name`), whatever host the client spells. */
function queueKey(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}

/** The `id` of a JSON body (our envelopes), if it has a string one. */
function eventIdOf(body: unknown): string | undefined {
  if (typeof body !== 'string' || !body.startsWith('{')) return undefined;
  try {
    const id = (JSON.parse(body) as { id?: unknown }).id;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

function parseJson(body: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body.length > 0 ? body.toString('utf8') : '{}');
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** A successful, uncompressed JSON answer, parsed; anything else is relayed as it came. */
function parseReply(reply: Reply): Record<string, unknown> | undefined {
  const encoding = reply.headers['content-encoding'];
  if (reply.status !== 200 || (encoding && encoding !== 'identity')) return undefined;
  return parseJson(reply.body);
}

function withBody(reply: Reply, body: unknown): Reply {
  return { ...reply, body: Buffer.from(JSON.stringify(body)) };
}

/** Writes a (possibly rewritten) answer; a client that has gone gets nothing. */
function relay(res: ServerResponse, reply: Reply): Promise<void> {
  if (res.destroyed || res.writableEnded) return Promise.resolve();
  const headers: IncomingHttpHeaders = { ...reply.headers };
  delete headers['transfer-encoding'];
  headers['content-length'] = String(reply.body.length);
  return new Promise((resolve) => {
    res.on('close', () => resolve());
    res.writeHead(reply.status, headers);
    res.end(reply.body, () => resolve());
  });
}

/** An answer of the layer's own, in the JSON protocol's form. */
function answer(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<void> {
  return relay(res, {
    status,
    headers: { 'content-type': JSON_TYPE, 'x-amzn-requestid': randomUUID(), ...headers },
    body: Buffer.from(JSON.stringify(body)),
  });
}

/**
 * Throttling as SQS answers it in the JSON protocol (docs/sqs-faults.md): the query-compatible
 * code in `x-amzn-query-error` (`Code;Sender`), the shape in `__type`. The SDK v3 client names
 * the error by the header's code and classes both codes as throttling.
 */
function answerThrottle(res: ServerResponse, error: SqsThrottleError): Promise<void> {
  switch (error) {
    case 'ThrottlingException':
      return answer(
        res,
        400,
        { __type: 'com.amazon.coral.availability#ThrottlingException', message: 'Rate exceeded' },
        { 'x-amzn-query-error': 'ThrottlingException;Sender' },
      );
    case 'RequestThrottled':
      return answer(
        res,
        403,
        { __type: 'com.amazonaws.sqs#RequestThrottled', message: 'Request is throttled.' },
        { 'x-amzn-query-error': 'RequestThrottled;Sender' },
      );
    case 'http-500':
      return answer(res, 500, {
        __type: 'InternalError',
        message: 'We encountered an internal error. Please try again.',
      });
    case 'http-503':
      return answer(res, 503, {
        __type: 'ServiceUnavailable',
        message: 'Service is unable to handle request.',
      });
  }
}

function fail(res: ServerResponse, err: unknown): void {
  if (res.destroyed || res.writableEnded) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(502, { 'content-type': 'text/plain' });
  res.end(String(err));
}
