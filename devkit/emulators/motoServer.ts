import { spawn } from 'node:child_process';
import { sleep } from '../../shared/util/async.js';
import { freePort } from '../freePort.js';

export interface MotoServer {
  /** `http://localhost:<port>` (moto misreads some services' requests made to 127.0.0.1). */
  endpoint: string;
  stop(): Promise<void>;
}

/**
 * `moto_server` (an AWS emulator in the machine's Python) on a free port of 127.0.0.1, for the
 * services nothing else here stands in for (Secrets Manager for the deployed bundles). Fails with
 * one line when it is not on PATH or does not answer within `timeoutMs`.
 */
export async function startMotoServer(timeoutMs = 30_000): Promise<MotoServer> {
  const port = await freePort();
  const child = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], {
    stdio: 'ignore',
  });
  const failed = new Promise<Error>((resolve) =>
    child.once('error', (err) => resolve(new Error(`moto_server could not start: ${err.message}`))),
  );
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    await gone;
  };
  const endpoint = `http://localhost:${port}`;
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const err = await Promise.race([failed, sleep(200).then(() => undefined)]);
    if (err) throw err;
    try {
      const res = await fetch(`${endpoint}/moto-api/`, { signal: AbortSignal.timeout(500) });
      if (res.status < 500) return { endpoint, stop };
    } catch {
      // not up yet
    }
  }
  await stop();
  throw new Error(`moto_server did not answer on ${endpoint} within ${timeoutMs / 1000} s`);
}
