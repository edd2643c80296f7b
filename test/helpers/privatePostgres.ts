import { execFile } from 'node:child_process';
import { chmod, chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * A PostgreSQL server of the test's own (initdb in a temporary directory, 127.0.0.1 on a free
 * port), whose every connection must authenticate with SCRAM-SHA-256: what the shared local server,
 * which trusts every connection, cannot show. Stopped and removed by `stop`. Not available where
 * the server binaries are missing, or when running as root without a `postgres` system user (the
 * server refuses to run as root).
 */
export interface PrivatePostgres {
  /** The superuser's URL (user `postgres`, with its password), database `postgres`. */
  url: string;
  port: number;
  stop(): Promise<void>;
}

export const SUPERUSER_PASSWORD = 'private-superuser-Pa55';

async function which(name: string): Promise<string | undefined> {
  try {
    return (await run('sh', ['-c', `command -v ${name}`])).stdout.trim() || undefined;
  } catch {
    return undefined;
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Starts one, or says in one line why it cannot (the caller skips). */
export async function startPrivatePostgres(): Promise<PrivatePostgres | string> {
  const [initdb, pgCtl] = [await which('initdb'), await which('pg_ctl')];
  if (!initdb || !pgCtl) return 'initdb or pg_ctl is not on PATH';
  const root = process.getuid?.() === 0;
  let uid: number | undefined;
  let gid: number | undefined;
  if (root) {
    try {
      uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
      gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    } catch {
      return 'running as root without a postgres system user to run the server as';
    }
  }
  const as = (cmd: string, args: string[]) =>
    root ? run('runuser', ['-u', 'postgres', '--', cmd, ...args]) : run(cmd, args);
  const dir = await mkdtemp(join(tmpdir(), 'rm-pg-'));
  const data = join(dir, 'data');
  const pwfile = join(dir, 'pw');
  await writeFile(pwfile, `${SUPERUSER_PASSWORD}\n`);
  if (root) {
    await chown(dir, uid as number, gid as number);
    await chown(pwfile, uid as number, gid as number);
  }
  await chmod(dir, 0o700);
  const remove = () => rm(dir, { recursive: true, force: true });
  try {
    await as(initdb, [
      '-D',
      data,
      '-U',
      'postgres',
      '--auth=scram-sha-256',
      `--pwfile=${pwfile}`,
      '--no-sync',
      '--no-instructions',
    ]);
    const port = await freePort();
    await as(pgCtl, [
      '-D',
      data,
      '-l',
      join(dir, 'log'),
      '-w',
      '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=40`,
      'start',
    ]);
    return {
      url: `postgres://postgres:${SUPERUSER_PASSWORD}@127.0.0.1:${port}/postgres`,
      port,
      async stop() {
        await as(pgCtl, ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => {});
        await remove();
      },
    };
  } catch (err) {
    await as(pgCtl, ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => {});
    await remove();
    return `could not start a private server: ${(err as Error).message.split('\n')[0]}`;
  }
}
