import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo, Server as NetServer } from 'node:net';
import type {
  APIGatewayProxyEventV2,
  APIGatewayProxyStructuredResultV2,
  Context,
} from 'aws-lambda';
import { localLambdaContext } from '../triggers/lambdaContext.js';

export type HttpApiHandler = (
  event: APIGatewayProxyEventV2,
  context: Context,
) => Promise<APIGatewayProxyStructuredResultV2>;

/** API Gateway HTTP APIs refuse larger payloads themselves (10 MB); so do we. */
const MAX_REQUEST_BYTES = 10 * 1024 * 1024;

/** Reads the body up to `limit` bytes; `'too-large'` beyond (the rest is not read). */
export async function readBody(
  req: IncomingMessage,
  limit = MAX_REQUEST_BYTES,
): Promise<Buffer | 'too-large'> {
  if (Number(req.headers['content-length'] ?? 0) > limit) return 'too-large';
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) return 'too-large';
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Starts `server` listening on 127.0.0.1:`port` (default: a free one); its address. */
export function listen(server: NetServer, port = 0): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** Closes `server` and every connection still open on it (keep-alive ones included). */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** Builds the API Gateway HTTP API (payload format 2.0) event for a Node request. */
export function toHttpApiEvent(req: IncomingMessage, body: Buffer): APIGatewayProxyEventV2 {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(',') : v;
  }
  const query: Record<string, string> = {};
  for (const [k, v] of url.searchParams) query[k] = query[k] ? `${query[k]},${v}` : v;
  const contentType = headers['content-type'] ?? '';
  const isText = body.length === 0 || /json|text|xml|urlencoded/i.test(contentType);
  const now = new Date();
  const method = req.method ?? 'GET';
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: url.pathname,
    rawQueryString: url.search.replace(/^\?/, ''),
    headers,
    ...(Object.keys(query).length ? { queryStringParameters: query } : {}),
    requestContext: {
      accountId: '000000000000',
      apiId: 'local',
      domainName: headers.host ?? 'localhost',
      domainPrefix: 'localhost',
      http: {
        method,
        path: url.pathname,
        protocol: `HTTP/${req.httpVersion}`,
        sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
        userAgent: headers['user-agent'] ?? '',
      },
      requestId: randomUUID(),
      routeKey: '$default',
      stage: '$default',
      time: now.toUTCString(),
      timeEpoch: now.getTime(),
    },
    ...(body.length > 0 ? { body: isText ? body.toString('utf8') : body.toString('base64') } : {}),
    isBase64Encoded: body.length > 0 && !isText,
  };
}

/**
 * Serves an API Gateway HTTP API handler over plain HTTP, invoking it in-process the way API
 * Gateway would (payload format 2.0). Used by `npm run dev`, the comparison lab and the HTTP tests.
 */
export async function startHttpApi(
  handler: HttpApiHandler,
  options: { port: number },
): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer(async (req, res) => {
    try {
      const body = await readBody(req);
      if (body === 'too-large') {
        res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
        res.end(
          JSON.stringify({ error: 'PayloadTooLarge', message: 'body: too large', field: 'body' }),
        );
        req.destroy();
        return;
      }
      const result = await handler(toHttpApiEvent(req, body), localLambdaContext('place-order'));
      const headers = { ...(result.headers ?? {}) } as Record<string, string>;
      res.writeHead(result.statusCode ?? 200, headers);
      res.end(
        result.isBase64Encoded && result.body
          ? Buffer.from(result.body, 'base64')
          : (result.body ?? ''),
      );
    } catch (err) {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'InternalError', message: (err as Error).message }));
    }
  });
  const { port } = await listen(server, options.port);
  return { url: `http://127.0.0.1:${port}`, close: () => closeServer(server) };
}
