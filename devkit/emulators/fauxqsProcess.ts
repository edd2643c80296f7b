import { startLoopbackFauxqs } from './sqsServer.js';

/**
 * The soak's SQS server as a process of its own, so the controller can kill and restart it:
 * fauxqs with SQLite persistence (`dataDir`, written through on every change), so queues and
 * messages (ready, delayed and in flight) survive a restart, as they survive one on SQS.
 * `node --import tsx devkit/emulators/fauxqsProcess.ts <port> <dataDir>`.
 */
const [port, dataDir] = process.argv.slice(2);
if (!port || !dataDir) {
  console.error('usage: fauxqsProcess.ts <port> <dataDir>');
  process.exit(2);
}
const server = await startLoopbackFauxqs({ port: Number(port), dataDir, logger: false });
console.log(`fauxqs: listening on ${server.port} (state in ${dataDir})`);
const stop = () => {
  void server.stop().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
