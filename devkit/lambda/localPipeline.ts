import pg from 'pg';
import { DB_ROLES, DB_SIDES, type DbSide } from '../../shared/pipeline/appRole.js';
import { RabbitManagement } from '../../shared/transport/rabbitmq/index.js';
import { withDatabase } from '../scratch.js';
import { type DeployedAssembly, readAssembly } from './assembly.js';
import {
  type CustomResourceResult,
  LocalDeployment,
  type LocalDeploymentOptions,
} from './LocalDeployment.js';
import { type SynthOptions, type SynthResult, synthesize } from './synth.js';

/**
 * This project's deployment stood up locally from `cdk synth`: the data stack and one pipeline
 * stack, with the secrets holding local identities of their own (so that parallel runs never share
 * a database login or a broker user) and cleaned up afterwards:
 * - the Aurora master secret → the user of `databaseUrl` (it creates roles and the inventory
 *   service's database, as the master does);
 * - each side's login secret (`orders_fn`, `inventory_fn`, `relay_fn`, `maintenance_fn` in AWS) →
 *   `<name>_orders_fn`, …, created by the migrate bundle;
 * - the broker administrator (`admin`) → the local broker's user (guest);
 * - the broker's pipeline user (`pipeline`) → `<name>_pipeline`, created by broker-setup.
 */
export interface LocalPipelineOptions extends Omit<LocalDeploymentOptions, 'secretValue'> {
  /** A unique, lowercase name (the scratch environment's): the local identities derive from it. */
  name: string;
  /** The RabbitMQ pipeline's virtual host (isolation): `BROKER_VHOST` and the event sources'. */
  vhost?: string;
}

export class LocalPipeline {
  private constructor(
    readonly deployment: LocalDeployment,
    /** Each side's login (its secret's user). */
    readonly dbUsers: Readonly<Record<DbSide, string>>,
    readonly brokerUser: string,
    private readonly options: LocalPipelineOptions,
  ) {}

  static async start(
    assembly: DeployedAssembly,
    options: LocalPipelineOptions,
  ): Promise<LocalPipeline> {
    const dbUsers = Object.fromEntries(
      DB_SIDES.map((side) => [side, `${options.name}_${DB_ROLES[side].login}`]),
    ) as Record<DbSide, string>;
    const brokerUser = `${options.name}_pipeline`;
    const db = new URL(options.services.databaseUrl);
    const broker = new URL(options.services.amqpUrl);
    const deployment = await LocalDeployment.start(assembly, {
      ...options,
      environment: {
        ...options.environment,
        ...(options.vhost ? { BROKER_VHOST: options.vhost } : {}),
      },
      secretValue: ({ path, generated }) => {
        if (path.endsWith('/Db/Secret')) {
          return {
            ...generated,
            username: decodeURIComponent(db.username || 'postgres'),
            password: decodeURIComponent(db.password) || 'local',
          };
        }
        // a side's login secret, known by the username the template gives it (`orders_fn`, …)
        const side = DB_SIDES.find((s) => generated.username === DB_ROLES[s].login);
        if (side) return { ...generated, username: dbUsers[side] };
        if (path.endsWith('/BrokerAdminCredentials')) {
          return {
            username: decodeURIComponent(broker.username),
            password: decodeURIComponent(broker.password),
          };
        }
        if (path.endsWith('/BrokerCredentials')) return { ...generated, username: brokerUser };
        return generated;
      },
    });
    return new LocalPipeline(deployment, dbUsers, brokerUser, options);
  }

  /**
   * What `cdk deploy` runs before anything else: the migrations custom resource (the inventory
   * service's database, both services' schemas, the sides' logins) and, on RabbitMQ, the broker
   * topology custom resource (queues, policies, pipeline user). Throws when one fails.
   */
  async deploy(): Promise<CustomResourceResult[]> {
    const results = [await this.deployment.customResource('Migrations', 'Create')];
    if (this.deployment.assembly.stacks.some((s) => s.template.Resources?.BrokerTopology)) {
      results.push(await this.deployment.customResource('BrokerTopology', 'Create'));
    }
    const failed = results.find((r) => r.status === 'FAILED');
    if (failed && failed.status === 'FAILED') throw new Error(`deploy failed: ${failed.reason}`);
    return results;
  }

  /**
   * Stops every function and stand-in (the deployment drops the inventory database its migrate
   * function created), then removes the local database logins and broker user.
   */
  async close(): Promise<void> {
    await this.deployment.stop();
    const admin = new pg.Client({
      connectionString: withDatabase(this.options.services.databaseUrl, 'postgres'),
    });
    try {
      await admin.connect();
      // the logins hold no grants of their own (their group roles do): nothing to drop first
      for (const user of Object.values(this.dbUsers)) {
        await admin.query(`DROP ROLE IF EXISTS ${user}`).catch(() => {});
      }
    } finally {
      await admin.end().catch(() => {});
    }
    await new RabbitManagement(this.options.services.managementUrl)
      .request('DELETE', `/api/users/${encodeURIComponent(this.brokerUser)}`)
      .catch(() => {});
  }
}

/** Synthesizes (or reuses) the app for a transport and reads its assembly. */
export async function synthesizedAssembly(
  options: SynthOptions,
): Promise<{ assembly: DeployedAssembly; synth: SynthResult }> {
  const synth = await synthesize(options);
  return { assembly: readAssembly(synth.dir), synth };
}
