import type { DbSide } from '../shared/pipeline/appRole.js';

/**
 * The outputs of a pipeline stack that operators' tooling reads (`npm run cli -- … --stack
 * <name>`, docs/cli.md). Names only, so that the CLI reads them without loading the CDK.
 */
export const STACK_OUTPUTS = {
  /** The HTTP API's endpoint (IAM-authorized: requests are signed with SigV4). */
  apiUrl: 'ApiUrl',
  /** The outbox relay function's name. */
  relayFunction: 'RelayFunction',
  /** The Aurora cluster the Data API calls name (`resourceArn`). */
  databaseClusterArn: 'DatabaseClusterArn',
  /** The order service's database in that cluster (the Data API's `database`). */
  databaseName: 'DatabaseName',
  /** The inventory service's database in the same cluster. */
  inventoryDatabaseName: 'InventoryDatabaseName',
  /** The database login of each side, as the Data API reads it (`secretArn`). */
  ordersDbSecretArn: 'OrdersDbSecretArn',
  inventoryDbSecretArn: 'InventoryDbSecretArn',
  relayDbSecretArn: 'RelayDbSecretArn',
  maintenanceDbSecretArn: 'MaintenanceDbSecretArn',
} as const;

/** Whose database login a command uses: the side whose tables it reads or changes. */
export type DatabaseLogin = DbSide;

export const DATABASE_LOGIN_OUTPUTS: Record<DatabaseLogin, string> = {
  orders: STACK_OUTPUTS.ordersDbSecretArn,
  inventory: STACK_OUTPUTS.inventoryDbSecretArn,
  relay: STACK_OUTPUTS.relayDbSecretArn,
  maintenance: STACK_OUTPUTS.maintenanceDbSecretArn,
};
