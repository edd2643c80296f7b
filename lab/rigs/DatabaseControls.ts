import { ReservationFailures } from '../../devkit/dbControls.js';
import { proxiedDatabase } from '../../devkit/scratch.js';
import type { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import { setStock } from '../../shared/inventory/stock.js';

/** Controls of the run's database: stock, reservation failures, pools through a proxy. */
export class DatabaseControls {
  readonly failures: ReservationFailures;
  /** The URL of each proxied pool (a peer that opens its own pool goes through the same proxy). */
  private readonly proxiedUrls = new WeakMap<SqlDatabase, string>();

  constructor(
    private readonly db: PgDatabase,
    private readonly url: string,
    private readonly onClose: (close: () => Promise<unknown>) => void,
  ) {
    this.failures = new ReservationFailures(db);
  }

  stock(sku: string, available: number) {
    return setStock(this.db, sku, available);
  }

  /** A pool on the run's database through a proxy the scenario can cut. */
  async proxied(options: { statementTimeoutMillis?: number } = {}) {
    const p = await proxiedDatabase(this.url, options);
    this.onClose(() => p.close());
    this.proxiedUrls.set(p.db, p.url);
    return p;
  }

  /** The URL a pool is reached at (a proxied pool's proxy, else the run's database). */
  urlOf(db: SqlDatabase): string {
    return this.proxiedUrls.get(db) ?? this.url;
  }
}
