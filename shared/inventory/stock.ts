import { ConstraintViolationError, type SqlExecutor } from '../index.js';
import { StockError } from './errors.js';

export interface StockLevel {
  sku: string;
  available: number;
  reserved: number;
}

/** Sets the units on hand for a SKU (creating it). Refused when below what is already reserved. */
export async function setStock(
  db: SqlExecutor,
  sku: string,
  available: number,
): Promise<StockLevel> {
  if (!Number.isInteger(available) || available < 0) {
    throw new StockError(`quantity must be a whole number ≥ 0, got ${available}`);
  }
  try {
    const { rows } = await db.query<{ sku: string; available: number; reserved: number }>(
      `INSERT INTO stock (sku, available) VALUES ($1, $2)
       ON CONFLICT (sku) DO UPDATE SET available = EXCLUDED.available, updated_at = now()
       RETURNING sku, available, reserved`,
      [sku, available],
    );
    return rows[0] as StockLevel;
  } catch (err) {
    if (err instanceof ConstraintViolationError) {
      throw new StockError(`cannot set ${sku} to ${available}: more units are already reserved`, {
        cause: err,
      });
    }
    throw err;
  }
}
