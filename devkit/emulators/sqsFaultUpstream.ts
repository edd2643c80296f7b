import {
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type RequestOptions,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import { fail, type Reply } from './sqsFaultWire.js';

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
