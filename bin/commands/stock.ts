import type { Command } from 'commander';
import { StockError, setStock } from '../../shared/inventory/stock.js';
import { withDb } from './common.js';

export function registerStockCommands(program: Command): void {
  program
    .command('stock')
    .description('manage stock levels')
    .command('set <sku> <quantity>')
    .description('set the units on hand for a SKU')
    .action(async (sku: string, quantity: string) => {
      await withDb(async (db) => {
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
