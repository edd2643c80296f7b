import { Server } from 'node:net';
import { ListQueuesCommand } from '@aws-sdk/client-sqs';
import { createSqsClient } from '../../shared/transport/sqs/index.js';

export interface LocalSqs {
  endpoint: string;
  /** True when this process started the server (it stops with the process). */
  embedded: boolean;
  stop(): Promise<void>;
}

async function answers(endpoint: string): Promise<boolean> {
  const client = createSqsClient({ endpoint, requestTimeoutMs: 1_000, maxAttempts: 1 });
  try {
    await client.send(new ListQueuesCommand({}));
    return true;
  } catch {
    return false;
  } finally {
    client.destroy();
  }
}

type FauxqsOptions = NonNullable<Parameters<typeof import('fauxqs').startFauxqs>[0]>;
type FauxqsServer = Awaited<ReturnType<typeof import('fauxqs').startFauxqs>>;

let loopbackOnly: Promise<unknown> = Promise.resolve();

/**
 * `startFauxqs`, listening on 127.0.0.1 only. fauxqs (2.4) always listens on 0.0.0.0, which would
 * let anyone on the network reach the queues; it has no listen-address option, so while it starts
 * (one start at a time) a `0.0.0.0` listen is turned into `127.0.0.1`.
 */
export async function startLoopbackFauxqs(
  options: Omit<FauxqsOptions, 'host'>,
): Promise<FauxqsServer> {
  const { startFauxqs } = await import('fauxqs');
  const start = loopbackOnly.then(async () => {
    const listen = Server.prototype.listen;
    Server.prototype.listen = function loopbackListen(this: Server, ...args: unknown[]) {
      const first = args[0] as { host?: string } | undefined;
      if (first && typeof first === 'object' && first.host === '0.0.0.0') {
        args[0] = { ...first, host: '127.0.0.1' };
      } else if (args[1] === '0.0.0.0') {
        args[1] = '127.0.0.1';
      }
      return (listen as (...a: unknown[]) => Server).apply(this, args);
    } as typeof listen;
    try {
      return await startFauxqs({ ...options, host: '127.0.0.1' });
    } finally {
      Server.prototype.listen = listen;
    }
  });
  loopbackOnly = start.catch(() => {});
  return start;
}

/**
 * The SQS endpoint for local roles: `SQS_ENDPOINT` when set; else a server already answering on
 * the fixed local port (another `dev` role started it, so every role shares one server); else an
 * embedded fauxqs server started in this process on that port, on 127.0.0.1 only.
 */
export async function ensureLocalSqs(options: {
  endpoint?: string | undefined;
  port: number;
}): Promise<LocalSqs> {
  const endpoint = options.endpoint || `http://127.0.0.1:${options.port}`;
  if (options.endpoint || (options.port !== 0 && (await answers(endpoint)))) {
    return { endpoint, embedded: false, stop: async () => {} };
  }
  const server = await startLoopbackFauxqs({ port: options.port, logger: false });
  return {
    endpoint: `http://127.0.0.1:${server.port}`,
    embedded: true,
    stop: () => server.stop(),
  };
}
