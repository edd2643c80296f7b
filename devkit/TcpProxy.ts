import type { AddressInfo } from 'node:net';
import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a service that a test or a lab scenario can cut and restore: "the broker is down" for one
 * client without stopping the broker every other test file shares. While cut, existing connections
 * are destroyed and new ones are refused. While flapping (`flap`), every connection is accepted
 * and passed through, then closed after a while: a broker behind a load balancer that drops it,
 * or a broker that accepts the handshake and then closes the connection.
 */
export class TcpProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private cutNow = false;
  port = 0;
  /** Connection attempts refused while cut (proof that a client tried to reconnect). */
  refused = 0;
  /** When each connection attempt arrived (ms since the epoch), cut or not. */
  readonly attempts: number[] = [];
  private flapAfterMs: number | undefined;
  /** Open connections as client → upstream pairs (for `holdReplies`). */
  private readonly pairs = new Set<{ client: Socket; upstream: Socket }>();
  private holding = false;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async start(): Promise<this> {
    const server = createServer((client) => {
      this.attempts.push(Date.now());
      if (this.cutNow) {
        this.refused++;
        client.destroy();
        return;
      }
      const upstream = createConnection({ host: this.targetHost, port: this.targetPort });
      this.track(client);
      this.track(upstream);
      const pair = { client, upstream };
      this.pairs.add(pair);
      client.pipe(upstream);
      if (!this.holding) upstream.pipe(client);
      else upstream.pause();
      const end = () => {
        this.pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end);
      upstream.on('error', end);
      client.on('close', end);
      upstream.on('close', end);
      if (this.flapAfterMs !== undefined) setTimeout(end, this.flapAfterMs).unref();
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    return this;
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
  }

  /** Drops every connection and refuses new ones. */
  cut(): void {
    this.cutNow = true;
    for (const s of this.sockets) s.destroy();
  }

  /**
   * From now on, closes every connection `afterMs` after it was accepted (0: at once), the ones
   * open now included; `restore` ends it.
   */
  flap(afterMs: number): void {
    this.flapAfterMs = afterMs;
    for (const s of this.sockets) setTimeout(() => s.destroy(), afterMs).unref();
  }

  /**
   * From now on the service's answers are held: what clients send still reaches it (a publish is
   * routed, a write applied), nothing it answers reaches them (no confirm, no response), as when
   * the process dies with its requests in flight. `releaseReplies` delivers what was held.
   */
  holdReplies(): void {
    this.holding = true;
    for (const { client, upstream } of this.pairs) {
      upstream.unpipe(client);
      upstream.pause();
    }
  }

  releaseReplies(): void {
    this.holding = false;
    for (const { client, upstream } of this.pairs) {
      upstream.pipe(client);
      upstream.resume();
    }
  }

  restore(): void {
    this.cutNow = false;
    this.flapAfterMs = undefined;
  }

  get connections(): number {
    return this.sockets.size / 2;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) =>
      this.server ? this.server.close(() => resolve()) : resolve(),
    );
  }
}
