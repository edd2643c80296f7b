import type { IGrantable } from 'aws-cdk-lib/aws-iam';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { DatabaseCluster } from 'aws-cdk-lib/aws-rds';
import type { ISecret } from 'aws-cdk-lib/aws-secretsmanager';
import {
  type FunctionEnvironment,
  type FunctionSettings,
  functionEnvironment,
} from '../../shared/config/functionEnvironment.js';

/**
 * How the functions reach the database: a cluster's Data API with one login per side (or, for
 * emulators, plain ARNs). Each function gets its side's secret and nothing else.
 */
export interface DatabaseAccess<Name extends string = string> {
  /** The cluster the Data API calls name (`resourceArn`). */
  clusterArn: string;
  databaseName: string;
  /** Each side's login secret (ARN): the Data API reads the username and password from it. */
  secretArns: Readonly<Record<Name, string>>;
  /** rds-data on the cluster and read of `side`'s secret, for one function. */
  grant(fn: IGrantable, side: Name): void;
}

/** The Data API settings of a function of `side` that reaches the database through `access`. */
export function dataApiSettings<Name extends string>(
  access: DatabaseAccess<Name>,
  side: Name,
): FunctionSettings['dataApi'] {
  return {
    resourceArn: access.clusterArn,
    secretArn: access.secretArns[side],
    database: access.databaseName,
  };
}

/**
 * One database login a function reaches the Data API with: what its environment names
 * (`DATA_API_*`) and what it is granted. The constructs take one for their function.
 */
export interface DataApiLogin {
  /** The cluster the Data API calls name (`resourceArn`). */
  clusterArn: string;
  databaseName: string;
  /** The login's secret (ARN): the Data API reads the username and password from it. */
  secretArn: string;
  /** rds-data on the cluster and read of the login's secret, for one function. */
  grant(fn: IGrantable): void;
}

/** The login of `side` of `access`. */
export function dataApiLogin<Name extends string>(
  access: DatabaseAccess<Name>,
  side: Name,
): DataApiLogin {
  return {
    clusterArn: access.clusterArn,
    databaseName: access.databaseName,
    secretArn: access.secretArns[side],
    grant: (fn) => access.grant(fn, side),
  };
}

/** The environment of a function that reaches the database as `login` (`DB_DRIVER=data-api`). */
export function dataApiEnvironment(login: DataApiLogin): FunctionEnvironment {
  return functionEnvironment({
    dataApi: {
      resourceArn: login.clusterArn,
      secretArn: login.secretArn,
      database: login.databaseName,
    },
  });
}

/**
 * The functions reach the cluster's Data API as their side's login (`secrets`: e.g.
 * `ServerlessDatabase.dbSecrets`, each a member of one group role your migrations grant), never as
 * the master user, whose secret only the migrate function reads.
 */
export function dataApiAccess<Name extends string>(
  cluster: DatabaseCluster,
  databaseName: string,
  secrets: Readonly<Record<Name, ISecret>>,
): DatabaseAccess<Name> {
  return {
    clusterArn: cluster.clusterArn,
    secretArns: Object.fromEntries(
      Object.entries<ISecret>(secrets).map(([name, secret]) => [name, secret.secretArn]),
    ) as Record<Name, string>,
    databaseName,
    grant: (fn, side) => {
      // rds-data:* on this cluster and read of the side's secret (grantDataApiAccess would add the
      // master's)
      fn.grantPrincipal.addToPrincipalPolicy(
        new PolicyStatement({
          actions: [
            'rds-data:BatchExecuteStatement',
            'rds-data:BeginTransaction',
            'rds-data:CommitTransaction',
            'rds-data:ExecuteStatement',
            'rds-data:RollbackTransaction',
          ],
          resources: [cluster.clusterArn],
        }),
      );
      secrets[side].grantRead(fn);
    },
  };
}
