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

/**
 * The SQS endpoint for local roles: `SQS_ENDPOINT` when set; else a server already answering on
 * the fixed local port (another `dev` role started it, so every role shares one server); else an
 * embedded fauxqs server started in this process on that port.
 */
export async function ensureLocalSqs(options: {
  endpoint?: string | undefined;
  port: number;
}): Promise<LocalSqs> {
  if (options.endpoint)
    return { endpoint: options.endpoint, embedded: false, stop: async () => {} };
  const endpoint = `http://127.0.0.1:${options.port}`;
  if (await answers(endpoint)) return { endpoint, embedded: false, stop: async () => {} };
  const { startFauxqs } = await import('fauxqs');
  const server = await startFauxqs({ port: options.port, logger: false });
  return { endpoint, embedded: true, stop: () => server.stop() };
}
