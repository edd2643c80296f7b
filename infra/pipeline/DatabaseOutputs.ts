import { CfnOutput, type Stack } from 'aws-cdk-lib';
import type { DatabaseAccess } from '../constructs/index.js';
import { DATABASE_LOGIN_OUTPUTS, type DatabaseLogin, STACK_OUTPUTS } from '../stackOutputs.js';

/**
 * What the CLI needs to reach each service's database of a deployment through the Data API
 * (docs/cli.md): the cluster, the order service's database, the inventory service's, and the secret
 * of each side's login. The operator reads one stack's outputs, so the data stack's values are
 * repeated here (outputs of imports: cfn-lint's W6001).
 */
export function addDatabaseOutputs(
  stack: Stack,
  database: DatabaseAccess<DatabaseLogin>,
  inventoryDatabaseName: string,
): void {
  new CfnOutput(stack, STACK_OUTPUTS.databaseClusterArn, {
    description: 'Aurora cluster (RDS Data API resourceArn)',
    value: database.clusterArn,
  });
  new CfnOutput(stack, STACK_OUTPUTS.databaseName, {
    description: 'The order service’s database (RDS Data API database)',
    value: database.databaseName,
  });
  new CfnOutput(stack, STACK_OUTPUTS.inventoryDatabaseName, {
    description: 'The inventory service’s database (RDS Data API database)',
    value: inventoryDatabaseName,
  });
  for (const [login, key] of Object.entries(DATABASE_LOGIN_OUTPUTS) as [DatabaseLogin, string][]) {
    new CfnOutput(stack, key, {
      description: `Database login of the ${login} side (RDS Data API secretArn)`,
      value: database.secretArns[login],
    });
  }
}
