import { CfnOutput, type Stack } from 'aws-cdk-lib';
import { DATABASE_LOGIN_OUTPUTS, type DatabaseLogin, STACK_OUTPUTS } from '../stackOutputs.js';
import type { DatabaseAccess } from './databaseAccess.js';

/**
 * What the CLI needs to reach the database of a deployment through the Data API (docs/cli.md):
 * the cluster, the database and the secret of each side's login. The operator reads one stack's
 * outputs, so the data stack's values are repeated here (outputs of imports: cfn-lint's W6001).
 */
export function addDatabaseOutputs(stack: Stack, database: DatabaseAccess<DatabaseLogin>): void {
  new CfnOutput(stack, STACK_OUTPUTS.databaseClusterArn, {
    description: 'Aurora cluster (RDS Data API resourceArn)',
    value: database.clusterArn,
  });
  new CfnOutput(stack, STACK_OUTPUTS.databaseName, { value: database.databaseName });
  for (const [login, key] of Object.entries(DATABASE_LOGIN_OUTPUTS) as [DatabaseLogin, string][]) {
    new CfnOutput(stack, key, {
      description: `Database login of the ${login} side (RDS Data API secretArn)`,
      value: database.secretArns[login],
    });
  }
}
