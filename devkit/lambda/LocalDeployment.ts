import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { inventoryDatabaseUrl } from '../../shared/pipeline/schema.js';
import { callLog, startCountingProxy } from '../emulators/countingProxy.js';
import {
  type AutoPauseOptions,
  type DataApiServer,
  startDataApiServer,
} from '../emulators/dataApiServer.js';
import { type LambdaInvokeServer, startLambdaInvokeServer } from '../emulators/lambdaInvoke.js';
import { startMotoServer } from '../emulators/motoServer.js';
import type { DeployedAssembly, DeployedFunction } from './assembly.js';
import {
  type CustomResourceRequestType,
  type CustomResourceResult,
  runCustomResource,
} from './customResource.js';
import {
  asyncInvokeSettingsOf,
  autoPauseOptionsOf,
  type DeployedSettings,
  deployedSettings,
} from './deployedSettings.js';
import { type StackScope, UnresolvedReferenceError } from './intrinsics.js';
import { LambdaFunction, type LambdaRuntimeOptions, writable } from './LambdaFunction.js';
import { LocalParameters } from './LocalParameters.js';
import { LocalQueues } from './LocalQueues.js';
import { LocalTopics } from './LocalTopics.js';
import { startLocalHttpApi } from './localHttpApi.js';
import { LOCAL_ACCOUNT, type LocalQueue, LocalResolver } from './localReferences.js';
import { LocalSecrets, type SecretValueOf } from './localSecrets.js';
import { linkRuntimeSdk } from './runtimeDir.js';

export type { CustomResourceResult } from './customResource.js';
export type { TemplateSecret } from './localSecrets.js';

/** Where the local stand-ins of the deployment's AWS services and broker are. */
export interface LocalServices {
  /**
   * The cluster's default database (the order service's: `DATA_API_DATABASE`) on the server the
   * local RDS Data API endpoint serves (a scratch one in tests and the lab).
   */
  databaseUrl: string;
  /**
   * The inventory service's database (`INVENTORY_DATA_API_DATABASE`), on the same server. Default
   * `inventoryDatabaseUrl({ DATABASE_URL: databaseUrl })`: `<database>_inventory`. It need not
   * exist: the migrate function creates it as deployed, and `stop()` drops it if it did not exist
   * at the start.
   */
  inventoryDatabaseUrl?: string | undefined;
  /** The local broker (plain AMQP); its credentials are not used by the functions. */
  amqpUrl: string;
  /** The broker's management API. */
  managementUrl: string;
  /** An SQS-compatible endpoint (fauxqs, moto), for a deployment with queues. */
  sqsEndpoint?: string | undefined;
  /** A Secrets Manager endpoint (moto_server); one is started when unset. */
  secretsEndpoint?: string | undefined;
}

export interface LocalDeploymentOptions {
  services: LocalServices;
  /** Prefix of the SQS queue names (isolation on a shared server). */
  sqsQueuePrefix?: string;
  /** The value stored for a template secret (default: `generated`). */
  secretValue?: SecretValueOf;
  /**
   * Values that replace what the template sets, for isolation on shared services (e.g.
   * `BROKER_VHOST` → a scratch virtual host). Applied only to variables a function has.
   */
  environment?: Record<string, string>;
  /** Every line a function writes. */
  onLog?: LambdaRuntimeOptions['onLog'];
  /**
   * Put a counting proxy in front of every AWS endpoint the functions reach (`calls` records each
   * request by service and operation: what AWS would bill).
   */
  countCalls?: boolean;
  /**
   * Emulate the cluster's automatic pause on the Data API endpoint: it pauses after the
   * template's `SecondsUntilAutoPause` × `timeScale` without a call (the cluster must have a
   * minimum of 0 ACU), and a resume takes `resumeMs` (default AWS's 15 s, unscaled: the
   * functions' timeouts are real). Unset: never paused (`database.setResuming` still works).
   */
  autoPause?: { timeScale: number; resumeMs?: number };
}

/**
 * A synthesized deployment stood up locally: every function of the assembly runnable from its
 * deployed bundle (`fn`), its environment taken from the template with each CloudFormation
 * reference resolved to a local stand-in (secrets in moto's Secrets Manager, the RDS Data API on
 * the local endpoint over PostgreSQL, queues on the local SQS server, the Amazon MQ broker's
 * endpoints on the local RabbitMQ), and the AWS SDK pointed at those through
 * `AWS_ENDPOINT_URL_<SERVICE>`. What no stand-in exists for fails by name. The cluster's databases
 * the functions name (`DATA_API_DATABASE`, `INVENTORY_DATA_API_DATABASE`) are local databases:
 * their variables name those (so the migrate function creates the inventory one under its local
 * name), and the endpoint serves a call naming either, by its deployed or its local name, there.
 */
export class LocalDeployment {
  readonly settings: DeployedSettings;
  readonly region = 'us-east-1';
  /** Every request the functions sent to the AWS endpoints (with `countCalls`). */
  readonly calls = callLog();
  private readonly resolver: LocalResolver;
  /** The functions run so far, by id (each created on first use). */
  private readonly functions = new Map<string, LambdaFunction>();
  private readonly stops: (() => Promise<unknown>)[] = [];
  /** Names the deployment's secrets and parameters apart from others' on a shared server. */
  private readonly localPrefix = `local-${randomUUID().slice(0, 8)}`;
  private workDir!: string;
  private secrets!: LocalSecrets;
  private parameters!: LocalParameters;
  private queues: LocalQueues | undefined;
  private topics: LocalTopics | undefined;
  private dataApi!: DataApiServer;
  private lambdaInvoke!: LambdaInvokeServer;
  /** The endpoints the functions reach, per service (behind the counting proxies with `countCalls`). */
  private endpoints: Record<string, string> = {};
  /** Each database name the template gives a Data API variable → its local database's URL. */
  private readonly databases: Map<string, string>;

  private constructor(
    readonly assembly: DeployedAssembly,
    private readonly options: LocalDeploymentOptions,
  ) {
    this.settings = deployedSettings(assembly);
    this.databases = deployedDatabases(assembly, options.services);
    this.resolver = new LocalResolver(assembly, this.region, options.services, {
      queue: (stackName, logicalId) => this.queues?.of(stackName, logicalId),
      topicArn: (stackName, logicalId) => this.topics?.of(stackName, logicalId),
      secretArn: (stackName, logicalId) => this.secrets?.arnOf(stackName, logicalId),
      parameterName: (stackName, logicalId) => this.parameters?.nameOf(stackName, logicalId),
    });
  }

  static async start(
    assembly: DeployedAssembly,
    options: LocalDeploymentOptions,
  ): Promise<LocalDeployment> {
    const d = new LocalDeployment(assembly, options);
    try {
      await d.init();
    } catch (err) {
      await d.stop().catch(() => {});
      throw err;
    }
    return d;
  }

  /** Stands up the local services in the order their references need them. */
  private async init(): Promise<void> {
    this.workDir = await mkdtemp(join(tmpdir(), 'rm-lambda-'));
    this.stops.push(async () => {
      await writable(this.workDir);
      await rm(this.workDir, { recursive: true, force: true });
    });
    await linkRuntimeSdk(join(this.workDir, 'runtime'));
    await this.dropCreatedDatabasesAtStop();
    const secretsEndpoint = await this.secretsEndpoint();
    this.secrets = new LocalSecrets(this.region, secretsEndpoint, this.localPrefix);
    await this.secrets.create(this.assembly, this.resolver.resolve, this.options.secretValue);
    await this.startDataApi();
    // Lambda's Invoke for the functions' own asynchronous invocations (the relay kick)
    this.lambdaInvoke = await startLambdaInvokeServer((name) => {
      const f = this.assembly.functions.find((x) => x.id === name);
      return f
        ? { invoke: (event) => this.fn(f.id).invoke(event), settings: asyncInvokeSettingsOf(f) }
        : undefined;
    });
    this.stops.push(() => this.lambdaInvoke.close());
    const { assembly, region, localPrefix } = this;
    this.parameters = new LocalParameters(assembly, region, secretsEndpoint, localPrefix);
    await this.parameters.create(this.resolver.resolve);
    const sqsEndpoint = this.options.services.sqsEndpoint;
    await this.routeEndpoints({
      SECRETS_MANAGER: secretsEndpoint,
      SSM: secretsEndpoint,
      RDS_DATA: this.dataApi.endpoint,
      LAMBDA: this.lambdaInvoke.endpoint,
      // fauxqs serves SNS beside SQS
      ...(sqsEndpoint ? { SQS: sqsEndpoint, SNS: sqsEndpoint } : {}),
    });
    if (!sqsEndpoint) return;
    const prefix = this.options.sqsQueuePrefix ?? '';
    this.queues = new LocalQueues(sqsEndpoint, region, prefix, this.sqsEndpoint ?? sqsEndpoint);
    await this.queues.create(assembly, this.resolver.resolve);
    this.topics = new LocalTopics(sqsEndpoint, region, prefix);
    await this.topics.create(assembly, this.resolver.resolve);
  }

  /** The Secrets Manager (and SSM) endpoint: the given one, or a moto_server started for it. */
  private async secretsEndpoint(): Promise<string> {
    if (this.options.services.secretsEndpoint) return this.options.services.secretsEndpoint;
    const moto = await startMotoServer();
    this.stops.push(() => moto.stop());
    return moto.endpoint;
  }

  /**
   * The local inventory database (and any other the deployment names but the cluster's default)
   * is the migrate function's to create, as deployed: one that does not exist now is dropped at
   * `stop()`, after the endpoint's connections are gone.
   */
  private async dropCreatedDatabasesAtStop(): Promise<void> {
    const others = [...new Set(this.databases.values())].filter(
      (url) => databaseNameOf(url) !== databaseNameOf(this.options.services.databaseUrl),
    );
    if (others.length === 0) return;
    const missing = await onServer(this.options.services.databaseUrl, async (c) => {
      const out: string[] = [];
      for (const url of others) {
        const name = databaseNameOf(url);
        const { rows } = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
        if (rows.length === 0) out.push(name);
      }
      return out;
    });
    if (missing.length === 0) return;
    this.stops.push(() =>
      onServer(this.options.services.databaseUrl, async (c) => {
        for (const name of missing) {
          const { rows } = await c.query<{ sql: string }>(
            "SELECT format('DROP DATABASE IF EXISTS %I WITH (FORCE)', $1::text) AS sql",
            [name],
          );
          await c.query(rows[0]?.sql as string);
        }
      }),
    );
  }

  /** The Data API reads each call's database user from the secret it names, as the service does. */
  private async startDataApi(): Promise<void> {
    const logins = new Map<string, { username: string; password: string }>();
    const { autoPause } = this.options;
    this.dataApi = await startDataApiServer({
      databaseUrl: this.options.services.databaseUrl,
      // each database by its deployed name and by its local one (what the variables name here)
      databases: Object.fromEntries(
        [...this.databases].flatMap(([name, url]) => [
          [name, url],
          [databaseNameOf(url), url],
        ]),
      ),
      autoPause: autoPause && this.autoPauseOf(autoPause),
      loginFor: async (arn) => {
        let login = logins.get(arn);
        if (!login) {
          const value = await this.secretValue(arn);
          login = { username: String(value.username), password: String(value.password) };
          logins.set(arn, login);
        }
        return login;
      },
    });
    this.stops.push(() => this.dataApi.close());
  }

  /** The endpoints the functions reach: `direct`, or a counting proxy in front of each. */
  private async routeEndpoints(direct: Record<string, string>): Promise<void> {
    this.endpoints = direct;
    if (!this.options.countCalls) return;
    const proxied: Record<string, string> = {};
    for (const [service, url] of Object.entries(direct)) {
      const name = service.toLowerCase().replace(/_/g, '-');
      const proxy = await startCountingProxy(url, name, this.calls);
      this.stops.push(proxy.close);
      proxied[service] = proxy.endpoint;
    }
    this.endpoints = proxied;
  }

  /**
   * The SQS endpoint the functions reach (through `AWS_ENDPOINT_URL_SQS`), if any: behind the
   * counting proxy with `countCalls`, so the event source mappings' polling (ReceiveMessage,
   * DeleteMessageBatch: billed as SQS requests on AWS) is counted with the functions' calls.
   */
  get sqsEndpoint(): string | undefined {
    return this.endpoints.SQS ?? this.options.services.sqsEndpoint;
  }

  /**
   * The local Data API endpoint, for its pause: `pause()`, `pauseStats()`, `setAutoPause()`
   * (`autoPauseOf` gives the template's setting scaled), and `setResuming(on)`: every call answers
   * `DatabaseResumingException` while on (a paused cluster resuming).
   */
  get database(): Pick<DataApiServer, 'pause' | 'pauseStats' | 'setAutoPause' | 'setResuming'> {
    return this.dataApi;
  }

  /**
   * The template's auto-pause as the endpoint's option: its cluster's `SecondsUntilAutoPause` ×
   * `timeScale`, and a resume of `resumeMs` (default `AURORA_AUTO_PAUSE.resumeMs`). Throws when the
   * cluster never pauses (a minimum capacity above 0).
   */
  autoPauseOf(o: { timeScale: number; resumeMs?: number }): AutoPauseOptions {
    return autoPauseOptionsOf(this.assembly, o);
  }

  /** What every environment gets from the platform: dummy credentials and the local endpoints. */
  get platformEnv(): Record<string, string> {
    return {
      AWS_ACCESS_KEY_ID: 'local',
      AWS_SECRET_ACCESS_KEY: 'local',
      AWS_SESSION_TOKEN: 'local',
      ...Object.fromEntries(
        Object.entries(this.endpoints).map(([service, url]) => [
          `AWS_ENDPOINT_URL_${service}`,
          url,
        ]),
      ),
    };
  }

  /** What the local Invoke endpoint did with a function's asynchronous events. */
  asyncStats(id: string) {
    return this.lambdaInvoke.stats(id);
  }

  /** Resolves when no asynchronous invocation is queued or running. */
  asyncIdle(): Promise<void> {
    return this.lambdaInvoke.idle();
  }

  /** Stores a new value in a template's SSM parameter (by its logical id), as an operator would. */
  setParameter(logicalId: string, value: string): Promise<void> {
    return this.parameters.set(logicalId, value);
  }

  /** The local value of a template value (throws `UnresolvedReferenceError`). */
  resolve(stack: StackScope, value: unknown, path = 'value'): unknown {
    return this.resolver.resolve(stack, value, path);
  }

  /** The stored value of a secret (as the functions read it from Secrets Manager). */
  secretValue(arn: string): Promise<Record<string, unknown>> {
    return this.secrets.value(arn);
  }

  /** A queue of the template by its name there (`inventory-orders`): its local URL and ARN. */
  queue(name: string): LocalQueue {
    const q = this.queues?.named(name);
    if (!q) throw new Error(`no local queue for ${name}`);
    return q;
  }

  /**
   * A function's environment: the template's variables, references resolved to the local stand-ins,
   * paths under /var/task mapped to the task root copy (where Lambda would have put the code),
   * then the isolation overrides.
   */
  environmentOf(fn: DeployedFunction, taskRoot: string): Record<string, string> {
    const env: Record<string, string> = {};
    for (const [name, raw] of Object.entries(fn.environment)) {
      let text = this.variable(fn, name, raw);
      if (text === '/var/task' || text.startsWith('/var/task/')) {
        text = taskRoot + text.slice('/var/task'.length);
      }
      const database = DATABASE_VARIABLES.has(name) ? this.databases.get(text) : undefined;
      if (database) text = databaseNameOf(database);
      env[name] = this.options.environment?.[name] ?? text;
    }
    return env;
  }

  /** A variable's value resolved locally, as text (never a list or a map). */
  private variable(fn: DeployedFunction, name: string, raw: unknown): string {
    let value: unknown;
    try {
      value = this.resolver.resolve(fn.stack, raw, `${fn.id}: Environment.Variables.${name}`);
    } catch (err) {
      if (err instanceof UnresolvedReferenceError) throw err;
      throw new Error(`${fn.id}: ${name}: ${(err as Error).message}`);
    }
    if (typeof value === 'object' && value !== null) {
      throw new Error(`${fn.id}: ${name} resolves to a ${Array.isArray(value) ? 'list' : 'map'}`);
    }
    return String(value);
  }

  /** The function `id` (`place-order`) run from its bundle (created on first use). */
  fn(id: string): LambdaFunction {
    const running = this.functions.get(id);
    if (running) return running;
    const deployed = this.assembly.function(id);
    if (!deployed.assetDir) throw new Error(`${id} has no asset folder (inline code)`);
    const taskRoot = LambdaFunction.taskRootOf(this.workDir, id);
    // created on first use: the endpoints in `platformEnv` are known by then
    const f = new LambdaFunction(
      {
        ...deployed,
        name: id,
        assetDir: deployed.assetDir,
        environment: this.environmentOf(deployed, taskRoot),
      },
      {
        workDir: this.workDir,
        runtimeDir: join(this.workDir, 'runtime'),
        platformEnv: this.platformEnv,
        region: this.region,
        accountId: LOCAL_ACCOUNT,
        ...(this.options.onLog ? { onLog: this.options.onLog } : {}),
      },
    );
    this.functions.set(id, f);
    return f;
  }

  /** Runs a custom resource's `onEvent` function as the CDK Provider framework does. */
  customResource(
    logicalId: string,
    requestType: CustomResourceRequestType,
    previous: { physicalResourceId?: string; oldProperties?: Record<string, unknown> } = {},
  ): Promise<CustomResourceResult> {
    return runCustomResource(this, logicalId, requestType, previous);
  }

  /** The HTTP API in front of the functions, as the template routes it (localHttpApi.ts). */
  async startHttpApi(port = 0): Promise<{ url: string; close(): Promise<void> }> {
    const api = await startLocalHttpApi(
      this.assembly,
      this.resolver.resolve,
      (id, event) => this.fn(id).invoke(event),
      port,
    );
    this.stops.push(api.close);
    return api;
  }

  /** Stops the functions, deletes what it created on shared servers, then stops its own. */
  async stop(): Promise<void> {
    await Promise.all([...this.functions.values()].map((f) => f.stop()));
    await this.topics?.delete();
    await this.queues?.delete();
    await this.parameters?.delete();
    await this.secrets?.delete();
    for (const stop of this.stops.reverse()) await stop().catch(() => {});
  }
}

/** The variables that name a database of the cluster (the Data API's `database`). */
const DATABASE_VARIABLES = new Set(['DATA_API_DATABASE', 'INVENTORY_DATA_API_DATABASE']);

/** The database of a PostgreSQL URL. */
function databaseNameOf(url: string): string {
  return decodeURIComponent(new URL(url).pathname.slice(1));
}

/**
 * The local database of each database name the template gives the functions: the cluster's
 * default (`DATA_API_DATABASE`) → `databaseUrl`, the inventory service's
 * (`INVENTORY_DATA_API_DATABASE`) → `inventoryDatabaseUrl`.
 */
function deployedDatabases(
  assembly: DeployedAssembly,
  services: LocalServices,
): Map<string, string> {
  const local: Record<string, string> = {
    DATA_API_DATABASE: services.databaseUrl,
    INVENTORY_DATA_API_DATABASE:
      services.inventoryDatabaseUrl ?? inventoryDatabaseUrl({ DATABASE_URL: services.databaseUrl }),
  };
  const out = new Map<string, string>();
  for (const fn of assembly.functions) {
    for (const [variable, url] of Object.entries(local)) {
      const name = fn.environment[variable];
      if (typeof name === 'string' && name !== '' && !out.has(name)) out.set(name, url);
    }
  }
  return out;
}

/** Runs `fn` connected to the `postgres` database of `url`'s server, as `url`'s user. */
async function onServer<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}
