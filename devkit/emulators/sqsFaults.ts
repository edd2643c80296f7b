import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { changeVisibility, deleteMessages } from './sqsFaultReceipts.js';
import { receive } from './sqsFaultReceive.js';
import { sendMessages } from './sqsFaultSend.js';
import { type Concerned, type LayerState, newLayerState } from './sqsFaultState.js';
import {
  answerThrottle,
  entriesOf,
  eventIdOf,
  fail,
  operationOf,
  parseJson,
  type SqsCall,
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

export { FAILED_ENTRY_CODE } from './sqsFaultSend.js';

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
  const server = await listen((req, res, body) => route(state, req, res, body));
  const { port } = server.address() as AddressInfo;
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
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** An HTTP server on a free local port, handing each request on with its body read. */
async function listen(
  handle: (req: IncomingMessage, res: ServerResponse, body: Buffer) => Promise<void>,
): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks)).catch((err: unknown) => fail(res, err));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return server;
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
