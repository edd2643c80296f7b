import { Command } from 'commander';
import { registerMaintenanceCommands } from './commands/maintenance.js';
import { registerOutboxCommands } from './commands/outbox.js';
import { registerParkedCommands } from './commands/parked.js';
import { registerStockCommands } from './commands/stock.js';

/** `npm run cli -- …`: operator commands, one module per command group. */
const program = new Command('cli').description('operate the reliable messaging pipeline');
registerOutboxCommands(program);
registerStockCommands(program);
registerMaintenanceCommands(program);
registerParkedCommands(program);
await program.parseAsync();
