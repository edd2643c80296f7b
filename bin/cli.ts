import { Command } from 'commander';
import { registerMaintenanceCommands } from './commands/maintenance.js';
import { registerOrdersCommands } from './commands/orders.js';
import { registerOutboxCommands } from './commands/outbox.js';
import { registerParkedCommands } from './commands/parked.js';
import { registerRelayCommands } from './commands/relay.js';
import { OperatorError } from './commands/stack.js';
import { registerStockCommands } from './commands/stock.js';

/**
 * `npm run cli -- …`: operator commands, one module per command group; with `--stack <name>`
 * against a deployment (docs/cli.md). A command that cannot start (no such stack, no credentials,
 * a missing output) prints one line and exits 2.
 */
const program = new Command('cli').description('operate the reliable messaging pipeline');
registerOutboxCommands(program);
registerStockCommands(program);
registerMaintenanceCommands(program);
registerParkedCommands(program);
registerOrdersCommands(program);
registerRelayCommands(program);
try {
  await program.parseAsync();
} catch (err) {
  if (!(err instanceof OperatorError)) throw err;
  console.error(err.message);
  process.exitCode = 2;
}
