import type { Command } from 'commander';
import { StockError } from '../../shared/inventory/errors.js';
import { setStock } from '../../shared/inventory/stock.js';
import { withDb } from './common.js';
import { stackOption } from './stack.js';

export function registerStockCommands(program: Command): void {
  program
    .command('stock')
    .description('manage stock levels')
    .command('set <sku> <quantity>')
    .description('set the units on hand for a SKU')
    .addOption(stackOption())
    .action(async (sku: string, quantity: string, opts: { stack?: string }) => {
      await withDb({ stack: opts.stack, login: 'inventory', service: 'inventory' }, async (db) => {
        try {
          const s = await setStock(db, sku, Number(quantity));
          console.log(`${s.sku}: available ${s.available}, reserved ${s.reserved}`);
        } catch (err) {
          if (err instanceof StockError) program.error(err.message);
          throw err;
        }
      });
    });
}
