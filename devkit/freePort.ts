import { type AddressInfo, createServer } from 'node:net';

/**
 * A free TCP port on `host` (default 127.0.0.1): the kernel picks one, the listener closes again,
 * and the caller (a child process, a server) binds it right after.
 */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
