import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import { readBody } from '../../devkit/emulators/httpApi.js';

export interface RecordedRequest {
  method: string;
  /** Path and query, as sent. */
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * An HTTP proxy in front of a local HTTP API (which checks no IAM authorization) that records every
 * request as it arrived, so a test can check the signature API Gateway would check.
 */
export async function recordingProxy(target: string): Promise<{
  url: string;
  requests: RecordedRequest[];
  close(): Promise<void>;
}> {
  const requests: RecordedRequest[] = [];
  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const text = body === 'too-large' ? '' : body.toString('utf8');
    requests.push({
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      headers: req.headers,
      body: text,
    });
    const { host: _host, connection: _c, 'content-length': _l, ...headers } = req.headers;
    try {
      const upstream = await fetch(`${target}${req.url ?? '/'}`, {
        method: req.method ?? 'GET',
        headers: headers as Record<string, string>,
        ...(text ? { body: text } : {}),
      });
      const hop = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);
      res.writeHead(
        upstream.status,
        Object.fromEntries([...upstream.headers].filter(([k]) => !hop.has(k))),
      );
      res.end(Buffer.from(await upstream.arrayBuffer()));
    } catch (err) {
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ message: (err as Error).message }));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * Checks a request's SigV4 `Authorization` the way the service does: the credential scope
 * (`<key>/<date>/<region>/<service>/aws4_request`), then the signature recomputed with the same
 * secret over the headers it names as signed, at the request's `x-amz-date`. Returns what is
 * wrong, or undefined.
 */
export async function sigV4Problem(
  request: RecordedRequest,
  expected: {
    credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
    region: string;
    service: string;
  },
): Promise<string | undefined> {
  const auth = String(request.headers.authorization ?? '');
  const m =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(
      auth,
    );
  if (!m) return `not a SigV4 Authorization header: '${auth}'`;
  const [, key, day, region, service, signedHeaders, signature] = m as unknown as string[];
  if (key !== expected.credentials.accessKeyId) return `signed with key ${key}`;
  if (region !== expected.region || service !== expected.service) {
    return `scope ${region}/${service}, expected ${expected.region}/${expected.service}`;
  }
  const amzDate = String(request.headers['x-amz-date'] ?? '');
  const d = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (!d || !amzDate.startsWith(String(day))) return `x-amz-date '${amzDate}' (scope ${day})`;
  const signingDate = new Date(`${d[1]}-${d[2]}-${d[3]}T${d[4]}:${d[5]}:${d[6]}Z`);
  const names = String(signedHeaders).split(';');
  if (!names.includes('host')) return 'host is not signed';
  const headers = Object.fromEntries(names.map((n) => [n, String(request.headers[n] ?? '')]));
  const url = new URL(request.url, `http://${request.headers.host}`);
  const signer = new SignatureV4({
    service: expected.service,
    region: expected.region,
    credentials: expected.credentials,
    sha256: Sha256,
  });
  const again = await signer.sign(
    {
      method: request.method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers,
      ...(request.body ? { body: request.body } : {}),
    },
    { signingDate },
  );
  const recomputed = /Signature=([0-9a-f]{64})/.exec(String(again.headers.authorization))?.[1];
  return recomputed === signature ? undefined : `signature ${signature} ≠ recomputed ${recomputed}`;
}
