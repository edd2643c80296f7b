import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateSecretCommand,
  DeleteSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SetQueueAttributesCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { DeleteParametersCommand, PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { createSqsClient } from '../../shared/transport/sqs/index.js';
import { callLog, startCountingProxy } from '../emulators/countingProxy.js';
import {
  AURORA_AUTO_PAUSE,
  type AutoPauseOptions,
  type DataApiServer,
  startDataApiServer,
} from '../emulators/dataApiServer.js';
import { startHttpApi } from '../emulators/httpApi.js';
import { type LambdaInvokeServer, startLambdaInvokeServer } from '../emulators/lambdaInvoke.js';
import { type MotoServer, startMotoServer } from '../emulators/motoServer.js';
import type { DeployedAssembly, DeployedFunction } from './assembly.js';
import { clusterAutoPauseOf, type DeployedSettings, deployedSettings } from './deployedSettings.js';
import {
  type CfnResource,
  type LocalReferences,
  resolveValue,
  type StackScope,
  UnresolvedReferenceError,
} from './intrinsics.js';
import { LambdaFunction, type LambdaRuntimeOptions, writable } from './LambdaFunction.js';
import { linkRuntimeSdk } from './runtimeDir.js';

/** Where the local stand-ins of the deployment's AWS services and broker are. */
export interface LocalServices {
  /** The database the local RDS Data API endpoint serves (a scratch one in tests and the lab). */
  databaseUrl: string;
  /** The local broker (plain AMQP); its credentials are not used by the functions. */
  amqpUrl: string;
  /** The broker's management API. */
  managementUrl: string;
  /** An SQS-compatible endpoint (fauxqs, moto), for a deployment with queues. */
  sqsEndpoint?: string | undefined;
  /** A Secrets Manager endpoint (moto_server); one is started when unset. */
  secretsEndpoint?: string | undefined;
}

/** A secret of the template, with the value the runner would store for it. */
export interface TemplateSecret {
  stackName: string;
  logicalId: string;
  /** The construct path (`ReliableMessagingData/AppSecret`). */
  path: string;
  /** The template's `SecretStringTemplate` fields plus a generated `GenerateStringKey`. */
  generated: Record<string, string>;
}

export interface LocalDeploymentOptions {
  services: LocalServices;
  /** Prefix of the SQS queue names (isolation on a shared server). */
  sqsQueuePrefix?: string;
  /** The value stored for a template secret (default: `generated`). */
  secretValue?: (secret: TemplateSecret) => Record<string, string>;
  /**
   * Values that replace what the template sets, for isolation on shared services (e.g.
   * `BROKER_VHOST` → a scratch virtual host; `vhost` does the same for the Amazon MQ event
   * source). Applied only to variables a function has; listed by `describe()`.
   */
  environment?: Record<string, string>;
  /** The Amazon MQ event sources' `VIRTUAL_HOST` (default: the template's). */
  vhost?: string;
  /** Freeze environments between invocations (default true). */
  freeze?: boolean;
  /** Every line a function writes. */
  onLog?: LambdaRuntimeOptions['onLog'];
  region?: string;
  /**
   * Put a counting proxy in front of every AWS endpoint the functions reach (`calls` records each
   * request by service and operation: what AWS would bill).
   */
  countCalls?: boolean;
  /**
   * Emulate the cluster's automatic pause on the Data API endpoint: it pauses after the
   * template's `SecondsUntilAutoPause` × `timeScale` without a call (the cluster must have a
   * minimum of 0 ACU), and a resume takes `resumeMs` (default AWS's 15 s, unscaled: the
   * functions' timeouts are real). Unset: never paused (`setDatabaseResuming` still works).
   */
  autoPause?: { timeScale: number; resumeMs?: number };
}

const ACCOUNT = '000000000000';

/**
 * A synthesized deployment stood up locally: every function of the assembly runnable from its
 * deployed bundle (`fn`), its environment taken from the template with each CloudFormation
 * reference resolved to a local stand-in (secrets in moto's Secrets Manager, the RDS Data API on
 * the local endpoint over PostgreSQL, queues on the local SQS server, the Amazon MQ broker's
 * endpoints on the local RabbitMQ), and the AWS SDK pointed at those through
 * `AWS_ENDPOINT_URL_<SERVICE>`. What no stand-in exists for fails by name.
 */
export class LocalDeployment {
  readonly settings: DeployedSettings;
  readonly region: string;
  private readonly functions = new Map<string, LambdaFunction>();
  private readonly secretArns = new Map<string, string>();
  private readonly queues = new Map<string, { url: string; arn: string; name: string }>();
  private readonly stops: (() => Promise<unknown>)[] = [];
  private secrets!: SecretsManagerClient;
  private sqs: SQSClient | undefined;
  private dataApi!: DataApiServer;
  private secretsEndpoint!: string;
  private lambdaInvoke!: LambdaInvokeServer;
  private readonly parameters = new Map<string, string>();
  /** Every request the functions sent to the AWS endpoints (with `countCalls`). */
  readonly calls = callLog();
  /** The endpoints the functions reach, per service (behind the counting proxies with `countCalls`). */
  private endpoints: Record<string, string> = {};
  private workDir!: string;
  private readonly secretPrefix = `local-${randomUUID().slice(0, 8)}`;
  /** Environment variables replaced for isolation, per function (for `describe`). */
  readonly overridden = new Map<string, string[]>();

  private constructor(
    readonly assembly: DeployedAssembly,
    private readonly options: LocalDeploymentOptions,
  ) {
    this.settings = deployedSettings(assembly);
    this.region = options.region ?? 'us-east-1';
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

  private async init(): Promise<void> {
    this.workDir = await mkdtemp(join(tmpdir(), 'rm-lambda-'));
    this.stops.push(async () => {
      await writable(this.workDir);
      await rm(this.workDir, { recursive: true, force: true });
    });
    await linkRuntimeSdk(join(this.workDir, 'runtime'));
    let moto: MotoServer | undefined;
    if (!this.options.services.secretsEndpoint) {
      moto = await startMotoServer();
      this.stops.push(() => moto?.stop() ?? Promise.resolve());
    }
    this.secretsEndpoint = this.options.services.secretsEndpoint ?? (moto as MotoServer).endpoint;
    this.secrets = new SecretsManagerClient({
      region: this.region,
      endpoint: this.secretsEndpoint,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    this.stops.push(async () => this.secrets.destroy());
    await this.createSecrets();
    // the Data API reads each call's database user from the secret it names, as the service does
    const logins = new Map<string, { username: string; password: string }>();
    const autoPause = this.options.autoPause ? this.autoPauseOf(this.options.autoPause) : undefined;
    this.dataApi = await startDataApiServer({
      databaseUrl: this.options.services.databaseUrl,
      ...(autoPause ? { autoPause } : {}),
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
    // Lambda's Invoke for the functions' own asynchronous invocations (the relay kick)
    this.lambdaInvoke = await startLambdaInvokeServer((name) => {
      const f = this.assembly.functions.find((x) => x.id === name);
      return f
        ? { invoke: (event) => this.fn(f.id).invoke(event), settings: this.asyncSettings(f) }
        : undefined;
    });
    this.stops.push(() => this.lambdaInvoke.close());
    await this.createParameters();
    const direct: Record<string, string> = {
      SECRETS_MANAGER: this.secretsEndpoint,
      SSM: this.secretsEndpoint,
      RDS_DATA: this.dataApi.endpoint,
      LAMBDA: this.lambdaInvoke.endpoint,
      ...(this.options.services.sqsEndpoint ? { SQS: this.options.services.sqsEndpoint } : {}),
    };
    this.endpoints = direct;
    if (this.options.countCalls) {
      const proxied: Record<string, string> = {};
      for (const [service, url] of Object.entries(direct)) {
        const proxy = await startCountingProxy(
          url,
          service.toLowerCase().replace(/_/g, '-'),
          this.calls,
        );
        this.stops.push(proxy.close);
        proxied[service] = proxy.endpoint;
      }
      this.endpoints = proxied;
    }
    if (this.options.services.sqsEndpoint) {
      const sqs = createSqsClient({
        endpoint: this.options.services.sqsEndpoint,
        region: this.region,
      });
      this.sqs = sqs;
      this.stops.push(async () => sqs.destroy());
      await this.createQueues();
    }
  }

  /**
   * The SQS endpoint the functions reach (through `AWS_ENDPOINT_URL_SQS`), if any: behind the
   * counting proxy with `countCalls`, so the event source mappings' polling (ReceiveMessage,
   * DeleteMessageBatch: billed as SQS requests on AWS) is counted with the functions' calls.
   */
  get sqsEndpoint(): string | undefined {
    return this.endpoints.SQS ?? this.options.services.sqsEndpoint;
  }

  /** The Data API endpoint the functions reach (through `AWS_ENDPOINT_URL_RDS_DATA`). */
  get dataApiEndpoint(): string {
    return this.dataApi.endpoint;
  }

  /** Every Data API call answers `DatabaseResumingException` while on (a paused cluster resuming). */
  setDatabaseResuming(on: boolean): void {
    this.dataApi.setResuming(on);
  }

  /**
   * The local Data API endpoint, for its pause: `pause()`, `pauseStats()`, `setAutoPause()`
   * (`autoPauseOf` gives the template's setting scaled).
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
    const cluster = clusterAutoPauseOf(this.assembly);
    if (cluster.secondsUntilAutoPause === undefined) {
      throw new Error(
        `${cluster.logicalId}: minimum capacity ${cluster.minCapacity} ACU: the cluster never pauses`,
      );
    }
    if (!Number.isFinite(o.timeScale) || o.timeScale <= 0) {
      throw new RangeError(`autoPause.timeScale: ${o.timeScale} is not > 0`);
    }
    return {
      secondsUntilAutoPause: cluster.secondsUntilAutoPause * o.timeScale,
      resumeMs: o.resumeMs ?? AURORA_AUTO_PAUSE.resumeMs,
    };
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

  /** A function's asynchronous invocation settings from its template. */
  private asyncSettings(f: DeployedFunction) {
    const resource = f.stack.template.Resources?.[f.logicalId];
    const reserved = resource?.Properties?.ReservedConcurrentExecutions;
    const config = Object.values(f.stack.template.Resources ?? {}).find(
      (r) =>
        r.Type === 'AWS::Lambda::EventInvokeConfig' &&
        JSON.stringify(r.Properties?.FunctionName) === JSON.stringify({ Ref: f.logicalId }),
    )?.Properties;
    return {
      ...(typeof reserved === 'number' ? { reservedConcurrency: reserved } : {}),
      ...(typeof config?.MaximumEventAgeInSeconds === 'number'
        ? { maxEventAgeMs: config.MaximumEventAgeInSeconds * 1000 }
        : {}),
      ...(typeof config?.MaximumRetryAttempts === 'number'
        ? { retryAttempts: config.MaximumRetryAttempts }
        : {}),
    };
  }

  /** The value of an SSM parameter of the template (as the functions read it). */
  parameterName(stackName: string, logicalId: string): string {
    const name = this.parameters.get(`${stackName}/${logicalId}`);
    if (!name) throw new Error(`no parameter ${stackName}/${logicalId}`);
    return name;
  }

  /** Stores a new value in a template's SSM parameter (by its logical id), as an operator would. */
  async setParameter(logicalId: string, value: string): Promise<void> {
    const found = this.assembly
      .resources('AWS::SSM::Parameter')
      .find((r) => r.logicalId === logicalId || r.logicalId.startsWith(logicalId));
    if (!found) throw new Error(`no parameter ${logicalId}`);
    const ssm = new SSMClient({
      region: this.region,
      endpoint: this.secretsEndpoint,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    try {
      await ssm.send(
        new PutParameterCommand({
          Name: this.parameterName(found.stack.stackName, found.logicalId),
          Value: value,
          Type: 'String',
          Overwrite: true,
        }),
      );
    } finally {
      ssm.destroy();
    }
  }

  /** Creates the templates' SSM parameters (String) in the local SSM with their values. */
  private async createParameters(): Promise<void> {
    const all = this.assembly.resources('AWS::SSM::Parameter');
    if (!all.length) return;
    const ssm = new SSMClient({
      region: this.region,
      endpoint: this.secretsEndpoint,
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    try {
      for (const { stack, logicalId, resource } of all) {
        const p = resource.Properties ?? {};
        // never the template's own name: the SSM server may be shared (tests, a cdk deploy against
        // moto), so each deployment's parameters are its own; `Ref` resolves to this name
        const name = `/${this.secretPrefix}/${stack.stackName}/${logicalId}`;
        await ssm.send(
          new PutParameterCommand({
            Name: name,
            Value: String(this.resolve(stack, p.Value, `${logicalId}.Value`)),
            Type: 'String',
            Overwrite: true,
          }),
        );
        this.parameters.set(`${stack.stackName}/${logicalId}`, name);
      }
    } finally {
      ssm.destroy();
    }
  }

  /** The local value of a template value (throws `UnresolvedReferenceError`). */
  resolve(stack: StackScope, value: unknown, path = 'value'): unknown {
    return resolveValue(value, stack, this.references, path);
  }

  /** The stored value of a secret (as the functions read it from Secrets Manager). */
  async secretValue(arn: string): Promise<Record<string, unknown>> {
    const out = await this.secrets.send(new GetSecretValueCommand({ SecretId: arn }));
    return JSON.parse(out.SecretString ?? '{}') as Record<string, unknown>;
  }

  /** The ARN standing in for a template secret (`Ref` of it). */
  secretArn(stackName: string, logicalId: string): string {
    const arn = this.secretArns.get(`${stackName}/${logicalId}`);
    if (!arn) throw new Error(`no secret ${stackName}/${logicalId}`);
    return arn;
  }

  /** A queue of the template by its name there (`inventory-orders`): its local URL and ARN. */
  queue(name: string): { url: string; arn: string; name: string } {
    const q = [...this.queues.values()].find(
      (x) => x.name === `${this.options.sqsQueuePrefix ?? ''}${name}`,
    );
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
    const overridden: string[] = [];
    for (const [name, raw] of Object.entries(fn.environment)) {
      let value: unknown;
      try {
        value = this.resolve(fn.stack, raw, `${fn.id}: Environment.Variables.${name}`);
      } catch (err) {
        if (err instanceof UnresolvedReferenceError) throw err;
        throw new Error(`${fn.id}: ${name}: ${(err as Error).message}`);
      }
      if (typeof value === 'object' && value !== null) {
        throw new Error(`${fn.id}: ${name} resolves to a ${Array.isArray(value) ? 'list' : 'map'}`);
      }
      let text = String(value);
      if (text === '/var/task' || text.startsWith('/var/task/')) {
        text = taskRoot + text.slice('/var/task'.length);
      }
      const override = this.options.environment?.[name];
      if (override !== undefined && override !== text) {
        text = override;
        overridden.push(name);
      }
      env[name] = text;
    }
    this.overridden.set(fn.id, overridden);
    return env;
  }

  /** The function `id` (`place-order`) run from its bundle (created on first use). */
  fn(id: string): LambdaFunction {
    let f = this.functions.get(id);
    if (f) return f;
    const deployed = this.assembly.function(id);
    if (!deployed.assetDir) throw new Error(`${id} has no asset folder (inline code)`);
    const options: LambdaRuntimeOptions = {
      workDir: this.workDir,
      runtimeDir: join(this.workDir, 'runtime'),
      platformEnv: this.platformEnv,
      region: this.region,
      accountId: ACCOUNT,
      ...(this.options.freeze !== undefined ? { freeze: this.options.freeze } : {}),
      ...(this.options.onLog ? { onLog: this.options.onLog } : {}),
    };
    const taskRoot = LambdaFunction.taskRootOf(this.workDir, id);
    f = new LambdaFunction(
      {
        name: id,
        assetDir: deployed.assetDir,
        handler: deployed.handler,
        runtime: deployed.runtime,
        timeoutSeconds: deployed.timeoutSeconds,
        memorySize: deployed.memorySize,
        environment: this.environmentOf(deployed, taskRoot),
      },
      options,
    );
    this.functions.set(id, f);
    return f;
  }

  /**
   * Runs a custom resource's `onEvent` function the way the CDK Provider framework does: the
   * CloudFormation request (built from the template's resource, its properties resolved) is the
   * payload of a synchronous invocation; a function error fails the resource with its message; the
   * response's `PhysicalResourceId` defaults to the request id on Create and may not change on
   * Delete (aws-cdk-lib `custom-resources` provider framework, `framework.ts`).
   */
  async customResource(
    logicalId: string,
    requestType: 'Create' | 'Update' | 'Delete',
    previous: { physicalResourceId?: string; oldProperties?: Record<string, unknown> } = {},
  ): Promise<CustomResourceResult> {
    const found = this.assembly.stacks
      .map((stack) => ({ stack, resource: stack.template.Resources?.[logicalId] }))
      .find((x) => x.resource !== undefined) as
      | { stack: StackScope; resource: CfnResource }
      | undefined;
    if (!found) throw new Error(`no custom resource ${logicalId}`);
    const { stack, resource } = found;
    const props = (resource.Properties ?? {}) as Record<string, unknown>;
    const provider = this.assembly.functionNamedBy(stack, props.ServiceToken);
    const userArn = provider?.environment.USER_ON_EVENT_FUNCTION_ARN;
    const user = provider ? this.assembly.functionNamedBy(stack, userArn) : undefined;
    if (!user)
      throw new Error(
        `${logicalId}: no Provider framework onEvent function behind its ServiceToken`,
      );
    const requestId = randomUUID();
    const request = {
      RequestType: requestType,
      ServiceToken: String(this.resolve(stack, props.ServiceToken, `${logicalId}.ServiceToken`)),
      ResponseURL: `https://cloudformation-custom-resource-response-local.s3.amazonaws.com/${requestId}`,
      StackId: `arn:aws:cloudformation:${this.region}:${ACCOUNT}:stack/${stack.stackName}/${randomUUID()}`,
      RequestId: requestId,
      LogicalResourceId: logicalId,
      ResourceType: resource.Type,
      ResourceProperties: this.resolve(stack, props, `${logicalId}.Properties`) as Record<
        string,
        unknown
      >,
      ...(requestType === 'Create'
        ? {}
        : {
            PhysicalResourceId: previous.physicalResourceId ?? requestId,
            OldResourceProperties: previous.oldProperties ?? {},
          }),
    };
    const outcome = await this.fn(user.id).invoke(request);
    if (!outcome.ok) {
      return {
        status: 'FAILED',
        reason: `${outcome.error.errorMessage}\n\nLogs: /aws/lambda/${user.id}\n`,
        request,
      };
    }
    const result = (outcome.payload ?? {}) as {
      PhysicalResourceId?: string;
      Data?: Record<string, unknown>;
    };
    const physicalResourceId =
      result.PhysicalResourceId ??
      (requestType === 'Create'
        ? requestId
        : (request as { PhysicalResourceId: string }).PhysicalResourceId);
    if (
      requestType === 'Delete' &&
      physicalResourceId !== (request as { PhysicalResourceId?: string }).PhysicalResourceId
    ) {
      return {
        status: 'FAILED',
        reason: `DELETE: cannot change the physical resource ID from "${(request as { PhysicalResourceId?: string }).PhysicalResourceId}" to "${physicalResourceId}" during deletion`,
        request,
      };
    }
    return { status: 'SUCCESS', physicalResourceId, data: result.Data ?? {}, request };
  }

  /**
   * The HTTP API in front of a function, as its template routes it: each `AWS::ApiGatewayV2::Route`
   * (`POST /orders`, `GET /orders/{id}`) with its route key and path parameters in the payload 2.0
   * event, unmatched requests answered 404 by the API itself, a function error answered 500
   * (`{"message":"Internal Server Error"}`). IAM authorization is not checked locally: the event
   * carries a local caller in `requestContext.authorizer.iam`.
   */
  async startHttpApi(port = 0): Promise<{ url: string; close(): Promise<void> }> {
    const routes = this.assembly
      .resources('AWS::ApiGatewayV2::Route')
      .map(({ stack, resource }) => {
        const p = resource.Properties ?? {};
        const target = String(this.resolve(stack, p.Target, 'Route.Target')).replace(
          /^integrations\//,
          '',
        );
        const integration = Object.entries(stack.template.Resources ?? {}).find(
          ([id, r]) => r.Type === 'AWS::ApiGatewayV2::Integration' && this.localName(id) === target,
        )?.[1];
        const fn = this.assembly.functionNamedBy(stack, integration?.Properties?.IntegrationUri);
        if (!fn) throw new Error(`route ${String(p.RouteKey)}: no function behind its integration`);
        const [method, path] = String(p.RouteKey).split(' ') as [string, string];
        return {
          routeKey: String(p.RouteKey),
          method,
          path,
          iam: p.AuthorizationType === 'AWS_IAM',
          fn,
        };
      });
    const api = await startHttpApi(
      async (event: APIGatewayProxyEventV2): Promise<APIGatewayProxyStructuredResultV2> => {
        const method = event.requestContext.http.method;
        const match = routes
          .map((r) => ({ r, params: matchPath(r.path, event.rawPath) }))
          .find((x) => x.r.method === method && x.params);
        if (!match?.params) {
          return {
            statusCode: 404,
            headers: { 'content-type': 'application/json' },
            body: '{"message":"Not Found"}',
          };
        }
        const routed: APIGatewayProxyEventV2 = {
          ...event,
          routeKey: match.r.routeKey,
          ...(Object.keys(match.params).length ? { pathParameters: match.params } : {}),
          requestContext: {
            ...event.requestContext,
            routeKey: match.r.routeKey,
            ...(match.r.iam
              ? {
                  authorizer: {
                    iam: {
                      accessKey: 'LOCAL',
                      accountId: ACCOUNT,
                      callerId: 'LOCAL',
                      cognitoIdentity: null,
                      principalOrgId: null,
                      userArn: `arn:aws:iam::${ACCOUNT}:user/local`,
                      userId: 'LOCAL',
                    },
                  },
                }
              : {}),
          } as APIGatewayProxyEventV2['requestContext'],
        };
        const outcome = await this.fn(match.r.fn.id).invoke(routed);
        if (!outcome.ok) {
          return {
            statusCode: 500,
            headers: { 'content-type': 'application/json' },
            body: '{"message":"Internal Server Error"}',
          };
        }
        return outcome.payload as APIGatewayProxyStructuredResultV2;
      },
      { port },
    );
    this.stops.push(api.close);
    return api;
  }

  /** A name a resource's `Ref` resolves to locally (integrations, rules: their logical id). */
  private localName(logicalId: string): string {
    return logicalId;
  }

  /** Which variables were replaced for isolation, per function. */
  describe(): string {
    const lines = [...this.overridden]
      .filter(([, v]) => v.length)
      .map(([k, v]) => `${k}: ${v.join(', ')}`);
    return lines.length ? `isolation overrides: ${lines.join('; ')}` : 'no environment overrides';
  }

  /** Registers something to stop with the deployment (triggers, servers). */
  onStop(stop: () => Promise<unknown>): void {
    this.stops.push(stop);
  }

  async stop(): Promise<void> {
    await Promise.all([...this.functions.values()].map((f) => f.stop()));
    // the queues it created (a shared local server outlives the deployment)
    for (const q of this.queues.values()) {
      await this.sqs?.send(new DeleteQueueCommand({ QueueUrl: q.url })).catch(() => {});
    }
    if (this.parameters.size) {
      const ssm = new SSMClient({
        region: this.region,
        endpoint: this.secretsEndpoint,
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      });
      await ssm
        .send(new DeleteParametersCommand({ Names: [...this.parameters.values()] }))
        .catch(() => {});
      ssm.destroy();
    }
    for (const arn of this.secretArns.values()) {
      await this.secrets
        ?.send(new DeleteSecretCommand({ SecretId: arn, ForceDeleteWithoutRecovery: true }))
        .catch(() => {});
    }
    for (const stop of this.stops.reverse()) await stop().catch(() => {});
  }

  /** Creates every secret of the templates in the local Secrets Manager, then stores its value. */
  private async createSecrets(): Promise<void> {
    const secrets = this.assembly.resources('AWS::SecretsManager::Secret');
    for (const { stack, logicalId } of secrets) {
      const out = await this.secrets.send(
        new CreateSecretCommand({
          Name: `${this.secretPrefix}/${stack.stackName}/${logicalId}`,
          SecretString: '{}',
        }),
      );
      this.secretArns.set(`${stack.stackName}/${logicalId}`, out.ARN as string);
    }
    // the values may reference other secrets (an app secret's `masterarn`): all ARNs exist now
    for (const { stack, logicalId, resource } of secrets) {
      const p = resource.Properties ?? {};
      const gen = p.GenerateSecretString as
        | { SecretStringTemplate?: unknown; GenerateStringKey?: string; PasswordLength?: number }
        | undefined;
      let generated: Record<string, string> = {};
      if (typeof p.SecretString === 'string') {
        generated = JSON.parse(String(this.resolve(stack, p.SecretString))) as Record<
          string,
          string
        >;
      } else if (gen) {
        const template = gen.SecretStringTemplate
          ? (JSON.parse(String(this.resolve(stack, gen.SecretStringTemplate))) as Record<
              string,
              string
            >)
          : {};
        generated = {
          ...template,
          ...(gen.GenerateStringKey
            ? {
                [gen.GenerateStringKey]: randomBytes(48)
                  .toString('base64')
                  .replace(/[^A-Za-z0-9]/g, '')
                  .slice(0, gen.PasswordLength ?? 32),
              }
            : {}),
        };
      }
      const path = String(resource.Metadata?.['aws:cdk:path'] ?? logicalId).replace(
        /\/Resource$/,
        '',
      );
      const value =
        this.options.secretValue?.({ stackName: stack.stackName, logicalId, path, generated }) ??
        generated;
      await this.secrets.send(
        new PutSecretValueCommand({
          SecretId: this.secretArn(stack.stackName, logicalId),
          SecretString: JSON.stringify(value),
        }),
      );
    }
  }

  /** Creates the templates' queues on the local SQS server (prefixed), with their attributes. */
  private async createQueues(): Promise<void> {
    const sqs = this.sqs as SQSClient;
    const all = this.assembly.resources('AWS::SQS::Queue');
    const prefix = this.options.sqsQueuePrefix ?? '';
    for (const { stack, logicalId, resource } of all) {
      const p = resource.Properties ?? {};
      const name = `${prefix}${String(p.QueueName ?? logicalId)}`;
      const attributes: Record<string, string> = {};
      for (const key of [
        'VisibilityTimeout',
        'MessageRetentionPeriod',
        'DelaySeconds',
        'MaximumMessageSize',
        'ReceiveMessageWaitTimeSeconds',
        'FifoQueue',
        'ContentBasedDeduplication',
      ]) {
        if (p[key] !== undefined) attributes[key] = String(p[key]);
      }
      const out = await sqs.send(
        new CreateQueueCommand({ QueueName: name, Attributes: attributes }),
      );
      // the server's own host names may not resolve (fauxqs: `sqs.<region>.127.0.0.1`): its
      // endpoint, or the counting proxy in front of it (the SDK sends to the queue URL's host)
      const path = String(out.QueueUrl).replace(/^[a-z]+:\/\/[^/]+/i, '');
      const url = `${new URL(this.endpoints.SQS ?? (this.options.services.sqsEndpoint as string)).origin}${path}`;
      const { Attributes } = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }),
      );
      this.queues.set(`${stack.stackName}/${logicalId}`, {
        url,
        arn: Attributes?.QueueArn as string,
        name,
      });
    }
    // redrive policies once every queue (and so every dead-letter target's ARN) exists
    for (const { stack, logicalId, resource } of all) {
      const redrive = resource.Properties?.RedrivePolicy;
      if (!redrive) continue;
      const q = this.queues.get(`${stack.stackName}/${logicalId}`) as { url: string };
      await sqs.send(
        new SetQueueAttributesCommand({
          QueueUrl: q.url,
          Attributes: {
            RedrivePolicy: JSON.stringify(
              this.resolve(stack, redrive, `${logicalId}.RedrivePolicy`),
            ),
          },
        }),
      );
    }
  }

  /** How the deployment's references resolve locally. */
  private get references(): LocalReferences {
    const region = this.region;
    const services = this.options.services;
    const broker = (u: string) => {
      const x = new URL(u);
      return `${x.protocol}//${x.host}`;
    };
    return {
      pseudo: {
        'AWS::Region': region,
        'AWS::AccountId': ACCOUNT,
        'AWS::Partition': 'aws',
        'AWS::URLSuffix': 'amazonaws.com',
      },
      stacks: this.assembly.stacks,
      ref: (stack, logicalId, resource) => {
        switch (resource.Type) {
          case 'AWS::SQS::Queue':
            return this.queues.get(`${stack.stackName}/${logicalId}`)?.url;
          case 'AWS::SecretsManager::Secret':
            return this.secretArns.get(`${stack.stackName}/${logicalId}`);
          case 'AWS::SSM::Parameter':
            return this.parameters.get(`${stack.stackName}/${logicalId}`);
          case 'AWS::SecretsManager::SecretTargetAttachment':
            return String(
              this.resolve(stack, resource.Properties?.SecretId, `${logicalId}.SecretId`),
            );
          case 'AWS::RDS::DBCluster':
            return `local-${logicalId.toLowerCase()}`;
          case 'AWS::AmazonMQ::Broker':
            return `b-local-${logicalId.toLowerCase()}`;
          case 'AWS::Lambda::Function':
            return this.assembly.functions.find(
              (f) => f.stack === stack && f.logicalId === logicalId,
            )?.id;
          case 'AWS::ApiGatewayV2::Integration':
          case 'AWS::ApiGatewayV2::Api':
          case 'AWS::Events::Rule':
            return this.localName(logicalId);
          default:
            return undefined;
        }
      },
      getAtt: (stack, logicalId, attribute, resource) => {
        if (resource.Type === 'AWS::SQS::Queue') {
          const q = this.queues.get(`${stack.stackName}/${logicalId}`);
          return attribute === 'Arn'
            ? q?.arn
            : attribute === 'QueueName'
              ? q?.name
              : attribute === 'QueueUrl'
                ? q?.url
                : undefined;
        }
        if (resource.Type === 'AWS::AmazonMQ::Broker') {
          if (attribute === 'AmqpEndpoints') return [broker(services.amqpUrl)];
          if (attribute === 'ConsoleURLs') return [broker(services.managementUrl)];
          if (attribute === 'Arn')
            return `arn:aws:mq:${region}:${ACCOUNT}:broker:${stack.stackName}-broker:b-local-${logicalId.toLowerCase()}`;
          return undefined;
        }
        if (resource.Type === 'AWS::Lambda::Function' && attribute === 'Arn') {
          const id = this.assembly.functions.find(
            (f) => f.stack === stack && f.logicalId === logicalId,
          )?.id;
          return id ? `arn:aws:lambda:${region}:${ACCOUNT}:function:${id}` : undefined;
        }
        if (resource.Type === 'AWS::Events::Rule' && attribute === 'Arn') {
          return `arn:aws:events:${region}:${ACCOUNT}:rule/${logicalId}`;
        }
        return undefined;
      },
    };
  }
}

export type CustomResourceResult =
  | {
      status: 'SUCCESS';
      physicalResourceId: string;
      data: Record<string, unknown>;
      request: Record<string, unknown>;
    }
  | { status: 'FAILED'; reason: string; request: Record<string, unknown> };

/** `/orders/{id}/cancel` against `/orders/42/cancel` → `{ id: '42' }`; undefined when it does not match. */
export function matchPath(template: string, path: string): Record<string, string> | undefined {
  const t = template.split('/');
  const p = path.split('/');
  if (t.length !== p.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < t.length; i++) {
    const seg = t[i] as string;
    const m = /^\{(\w+)\}$/.exec(seg);
    if (m) params[m[1] as string] = decodeURIComponent(p[i] as string);
    else if (seg !== p[i]) return undefined;
  }
  return params;
}
