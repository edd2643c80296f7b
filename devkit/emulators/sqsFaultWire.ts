/**
 * The AWS JSON 1.0 protocol as the SQS fault layer (sqsFaults.ts) reads and answers it: the
 * calls' shapes, parsed answers, answers of its own, and the endpoint behind it.
 */

import { randomUUID } from 'node:crypto';
import {
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type RequestOptions,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { SqsThrottleError } from './sqsFaults.js';

const JSON_TYPE = 'application/x-amz-json-1.0';

/** SQS's answer to a request that failed on its side (API Reference, Common Errors). */
export const INTERNAL_ERROR = {
  __type: 'InternalError',
  message: 'We encountered an internal error. Please try again.',
};

export interface SqsMessage {
  MessageId?: string;
  ReceiptHandle?: string;
  Body?: string;
  Attributes?: Record<string, string>;
  [key: string]: unknown;
}

export interface BatchEntry {
  Id?: string;
  ReceiptHandle?: string;
  MessageBody?: string;
  [key: string]: unknown;
}

/** An answer, buffered. */
export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** A client's call in the JSON protocol: its operation and its parsed input. */
export interface SqsCall {
  req: IncomingMessage;
  res: ServerResponse;
  op: string;
  body: Buffer;
  input: Record<string, unknown>;
}

/** The operation a request names (`X-Amz-Target: AmazonSQS.<Operation>`), if any. */
export function operationOf(req: IncomingMessage): string | undefined {
  const target = req.headers['x-amz-target'];
  return (Array.isArray(target) ? target[0] : target)?.match(/^AmazonSQS\.(\w+)$/)?.[1];
}

/** The `Entries` of a batch call. */
export function entriesOf(input: Record<string, unknown>): BatchEntry[] {
  return (input.Entries as BatchEntry[] | undefined) ?? [];
}

/** A queue by its path (`/000000000000/name`), whatever host the client spells. */
export function queueKey(url: string): string {
  try {
    return new URL(url).pathname;
  } catch {
    return url;
  }
}

/** The `id` of a JSON body (our envelopes), if it has a string one. */
export function eventIdOf(body: unknown): string | undefined {
  if (typeof body !== 'string' || !body.startsWith('{')) return undefined;
  try {
    const id = (JSON.parse(body) as { id?: unknown }).id;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

export function parseJson(body: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body.length > 0 ? body.toString('utf8') : '{}');
    return value && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

export function jsonBody(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}

/** A successful, uncompressed JSON answer, parsed; anything else is relayed as it came. */
export function parseReply(reply: Reply): Record<string, unknown> | undefined {
  const encoding = reply.headers['content-encoding'];
  if (reply.status !== 200 || (encoding && encoding !== 'identity')) return undefined;
  return parseJson(reply.body);
}

export function withBody(reply: Reply, body: unknown): Reply {
  return { ...reply, body: jsonBody(body) };
}

/** Writes a (possibly rewritten) answer; a client that has gone gets nothing. */
export function relay(res: ServerResponse, reply: Reply): Promise<void> {
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
export function answer(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<void> {
  return relay(res, {
    status,
    headers: { 'content-type': JSON_TYPE, 'x-amzn-requestid': randomUUID(), ...headers },
    body: jsonBody(body),
  });
}

/**
 * Throttling as SQS answers it in the JSON protocol (docs/sqs-faults.md): the query-compatible
 * code in `x-amzn-query-error` (`Code;Sender`), the shape in `__type`. The SDK v3 client names
 * the error by the header's code and classes both codes as throttling.
 */
export function answerThrottle(res: ServerResponse, error: SqsThrottleError): Promise<void> {
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
      return answer(res, 500, INTERNAL_ERROR);
    case 'http-503':
      return answer(res, 503, {
        __type: 'ServiceUnavailable',
        message: 'Service is unable to handle request.',
      });
  }
}

/** The answer to a request the layer could not complete: 502, or a cut connection mid-answer. */
export function fail(res: ServerResponse, err: unknown): void {
  if (res.destroyed || res.writableEnded) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(502, { 'content-type': 'text/plain' });
  res.end(String(err));
}

/** The SQS endpoint behind the fault layer: requests go on to it as the client sent them. */
export class Upstream {
  private readonly target: URL;
  private readonly send: typeof httpRequest;

  constructor(url: string) {
    this.target = new URL(url);
    this.send = this.target.protocol === 'https:' ? httpsRequest : httpRequest;
  }

  /** Sends `body` upstream as the client's request and buffers the answer. */
  forward(req: IncomingMessage, body: Buffer): Promise<Reply> {
    const headers: IncomingHttpHeaders = { ...req.headers, host: this.target.host };
    delete headers['transfer-encoding'];
    headers['content-length'] = String(body.length);
    // the layer reads the answer: ask for it uncompressed
    headers['accept-encoding'] = 'identity';
    return new Promise((resolve, reject) => {
      const up = this.send(this.requestOptions(req, headers), (res) => {
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
      });
      up.on('error', reject);
      up.end(body);
    });
  }

  /** Unchanged, streamed both ways (what the layer does with everything it does not act on). */
  passThrough(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
    const headers = { ...req.headers, host: this.target.host };
    const up = this.send(this.requestOptions(req, headers), (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    });
    up.on('error', (err) => fail(res, err));
    up.end(body);
  }

  private requestOptions(req: IncomingMessage, headers: IncomingHttpHeaders): RequestOptions {
    return {
      protocol: this.target.protocol,
      hostname: this.target.hostname,
      port: this.target.port,
      method: req.method,
      path: req.url,
      headers,
    };
  }
}
