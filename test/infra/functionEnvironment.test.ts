import { App, type Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { type PipelineConfig, pipelineConfig, validatePipelineConfig } from '../../infra/config.js';
import { dataApiAccess } from '../../infra/constructs/index.js';
import { DataStack } from '../../infra/stacks/DataStack.js';
import { RabbitPipelineStack } from '../../infra/stacks/RabbitPipelineStack.js';
import { SqsPipelineStack } from '../../infra/stacks/SqsPipelineStack.js';
import { budgetOf, ENV_NAMES } from '../../shared/config/env.js';
import {
  ConfigError,
  DEFAULT_REDRIVE_LIMIT,
  DEFAULT_REDRIVE_WINDOW_MS,
  type Env,
  loadEnv,
  RETENTION_ENV,
  type Retention,
  type RetryBudget,
  retentionOf,
  transactionTimeoutsOf,
} from '../../shared/index.js';
import { DB_ROLES, DB_SIDES } from '../../shared/pipeline/appRole.js';

/**
 * What infra writes is what the runtime reads: every synthesized function's environment parses
 * with the runtime schema (`loadEnv`, the cross-field rules included), holds no variable the
 * schema does not know (besides Node.js's and Powertools'), and carries the budget and retention
 * the stack was given.
 */

/** Read by Node.js and Powertools themselves, not by the configuration schema. */
const PLATFORM_VARIABLES = new Set([
  'NODE_OPTIONS',
  'POWERTOOLS_SERVICE_NAME',
  'POWERTOOLS_LOG_LEVEL',
]);

/**
 * Values CloudFormation resolves at deploy (`Ref`, `Fn::GetAtt`, `Fn::Select`: ARNs, queue URLs,
 * broker endpoints) cannot be checked at synth; each is replaced by a value every field accepts,
 * a URL, so the rest of the environment is still parsed.
 */
const DEPLOY_TIME_VALUE = 'https://resolved-at-deploy.invalid/';

const DAY = 24 * 3600 * 1000;
/** Not the defaults, so a variable the functions did not get would show. */
const BUDGET: RetryBudget = {
  ladderMs: [2_000, 10_000],
  maxAttempts: 2,
  maxAgeMs: 120_000,
  jitter: 0.2,
};
const RETENTION: Retention = {
  parkingMs: 2 * DAY,
  inboxMs: 6 * DAY,
  publishedOutboxMs: DAY,
  redriveWindowMs: DAY / 2,
  redriveLimit: 2,
};

interface SynthesizedFunction {
  service: string;
  variables: Record<string, string>;
  deployTime: string[];
  /** The function's `Timeout` (s). */
  timeout: number;
}

/** A literal as it is; a `Fn::Join` with its literal parts kept; any other reference a URL. */
function deployTimeValue(v: unknown): string {
  if (typeof v === 'string') return v;
  const join = (v as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  if (join) {
    return join[1]
      .map((part) => (typeof part === 'string' ? part : 'arn:resolved-at-deploy'))
      .join(join[0]);
  }
  return DEPLOY_TIME_VALUE;
}

function functionsOf(stack: Stack): SynthesizedFunction[] {
  const resources = Template.fromStack(stack).findResources('AWS::Lambda::Function');
  return Object.values(resources).flatMap((r) => {
    const props = (
      r as {
        Properties: { Timeout?: number; Environment?: { Variables?: Record<string, unknown> } };
      }
    ).Properties;
    const raw = (props.Environment?.Variables ?? {}) as Record<string, unknown>;
    const service = raw.POWERTOOLS_SERVICE_NAME;
    if (typeof service !== 'string') return []; // the CDK provider framework's own function
    const deployTime = Object.keys(raw).filter((k) => typeof raw[k] !== 'string');
    const variables = Object.fromEntries(
      Object.entries(raw).map(([k, v]) => [k, deployTimeValue(v)]),
    );
    return [{ service, variables, deployTime, timeout: props.Timeout ?? 3 }];
  });
}

function synth(transport: 'sqs' | 'rabbitmq', config: PipelineConfig) {
  // no bundling in tests (esbuild runs on `cdk synth`): the templates are what we assert
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const data = new DataStack(app, 'Data');
  const database = dataApiAccess(data.cluster, data.databaseName, data.dbSecrets);
  const { inventoryDatabaseName } = data;
  const pipeline =
    transport === 'sqs'
      ? new SqsPipelineStack(app, 'Sqs', { config, database, inventoryDatabaseName })
      : new RabbitPipelineStack(app, 'Rabbit', { config, database, inventoryDatabaseName });
  return { data: functionsOf(data), pipeline: functionsOf(pipeline) };
}

function parse(fn: SynthesizedFunction): Env {
  const unknown = Object.keys(fn.variables).filter(
    (k) => !PLATFORM_VARIABLES.has(k) && !(ENV_NAMES as string[]).includes(k),
  );
  expect(unknown, `${fn.service}: variables the runtime schema does not read`).toEqual([]);
  return loadEnv(fn.variables);
}

const EXPECTED_SERVICES = {
  sqs: ['maintenance', 'order-results-sqs', 'outbox-relay', 'place-order', 'reserve-inventory-sqs'],
  rabbitmq: [
    'broker-setup',
    'maintenance',
    'order-results-rabbitmq',
    'outbox-relay',
    'place-order',
    'reserve-inventory-rabbitmq',
  ],
} as const;

describe.each([
  ['default', () => pipelineConfig()],
  ['custom', () => pipelineConfig(BUDGET, RETENTION)],
] as const)('function environments (%s budget and retention)', (_, makeConfig) => {
  const config = makeConfig();

  it.each(['sqs', 'rabbitmq'] as const)(
    '%s: every function parses with loadEnv and carries the budget and retention infra was given',
    (transport) => {
      const { pipeline } = synth(transport, config);
      expect(pipeline.map((f) => f.service).sort()).toEqual([...EXPECTED_SERVICES[transport]]);
      for (const fn of pipeline) {
        const env = parse(fn);
        expect(budgetOf(env), fn.service).toEqual(config.budget);
        // every retention setting the inbox rule reads, as given (not the runtime's defaults)
        expect(retentionOf(env), fn.service).toEqual({
          redriveWindowMs: DEFAULT_REDRIVE_WINDOW_MS,
          redriveLimit: DEFAULT_REDRIVE_LIMIT,
          ...config.retention,
        });
        for (const name of Object.values(RETENTION_ENV)) {
          expect(fn.variables[name], `${fn.service} ${name}`).toBeDefined();
        }
        expect(env.TRANSPORT, fn.service).toBe(transport);
        // the transaction bounds come from the function's real timeout, not the 5 s default
        expect(fn.variables.FUNCTION_TIMEOUT_MS, fn.service).toBe(String(fn.timeout * 1000));
        expect(transactionTimeoutsOf(env).statementTimeoutMs, fn.service).toBe(
          Math.floor(fn.timeout * 1000 * 0.8),
        );
        // the SQS consumers carry their queue's visibility, so loadEnv checked the 6× rule
        const consumesSqs =
          fn.service === 'reserve-inventory-sqs' || fn.service === 'order-results-sqs';
        expect(env.SQS_VISIBILITY_TIMEOUT_S, fn.service).toBe(
          consumesSqs ? config.sqs.visibilityTimeoutSeconds : undefined,
        );
        // every function but broker-setup reaches the database, through the Data API
        if (fn.service === 'broker-setup') {
          expect(
            Object.keys(fn.variables).filter((k) => k.startsWith('DATA_API_') || k === 'DB_DRIVER'),
          ).toEqual([]);
        } else {
          expect(env.DB_DRIVER, fn.service).toBe('data-api');
          for (const k of ['DATA_API_RESOURCE_ARN', 'DATA_API_SECRET_ARN'] as const) {
            expect(env[k], `${fn.service} ${k}`).toBeDefined();
          }
          expect(env.DATA_API_DATABASE, fn.service).toBe('reliable_messaging');
          // the functions that reach the inventory service's database: reserve-inventory's own,
          // the relay's and maintenance's besides the order service's
          const reachesInventory =
            fn.service.startsWith('reserve-inventory-') ||
            fn.service === 'outbox-relay' ||
            fn.service === 'maintenance';
          expect(env.INVENTORY_DATA_API_DATABASE, fn.service).toBe(
            reachesInventory ? 'reliable_messaging_inventory' : undefined,
          );
        }
        if (fn.service === 'outbox-relay') {
          expect(env.RELAY_DRAIN_BUDGET_MS).toBe(config.relay.drainBudgetMs);
          expect(env.RELAY_IDLE_WAIT_MS).toBe(config.relay.idleWaitMs);
        }
        if (transport === 'sqs') {
          // reserve-inventory and the relay publish inventory's events to its topic (fan-out)
          const publishesInventory = ['reserve-inventory-sqs', 'outbox-relay'].includes(fn.service);
          expect(fn.deployTime, fn.service).toEqual(
            expect.arrayContaining([
              'SOURCE_QUEUE_URL',
              'PARKING_QUEUE_URL',
              ...(publishesInventory ? ['STREAM_TOPIC_ARNS'] : ['RESULTS_QUEUE_URL']),
            ]),
          );
          if (publishesInventory) {
            expect(Object.keys(env.STREAM_TOPIC_ARNS ?? {}), fn.service).toEqual([
              'inventory_outbox',
            ]);
          }
          if (fn.service === 'reserve-inventory-sqs') expect(env.SQS_RETRY_MODE).toBe('visibility');
        } else {
          const speaksAmqp = fn.service !== 'place-order' && fn.service !== 'maintenance';
          expect(env.BROKER_SECRET_ARN !== undefined, fn.service).toBe(speaksAmqp);
          if (speaksAmqp) {
            expect(fn.deployTime, fn.service).toEqual(
              expect.arrayContaining(['BROKER_AMQP_ENDPOINT', 'BROKER_MANAGEMENT_ENDPOINT']),
            );
            expect(env.BROKER_VHOST).toBe(config.rabbitmq.vhost);
          }
        }
      }
    },
  );
});

describe('function environments: data stack and the rules at synth', () => {
  it('the migrate function parses with loadEnv and reads the migrations its bundle ships', () => {
    const { data } = synth('sqs', pipelineConfig());
    expect(data.map((f) => f.service)).toEqual(['migrate']);
    const fn = data[0] as SynthesizedFunction;
    const env = parse(fn);
    expect(fn.variables.FUNCTION_TIMEOUT_MS).toBe(String(fn.timeout * 1000));
    expect(env.DB_DRIVER).toBe('data-api');
    expect(env.MIGRATIONS_DIR).toBe('/var/task/migrations');
    // both services' databases of the cluster, as the master user
    expect(env.DATA_API_DATABASE).toBe('reliable_messaging');
    expect(env.INVENTORY_DATA_API_DATABASE).toBe('reliable_messaging_inventory');
    // each side's login secret
    expect(fn.deployTime).toEqual(expect.arrayContaining(['DB_LOGIN_SECRETS']));
    expect(Object.keys(env.DB_LOGIN_SECRETS ?? {}).sort()).toEqual(
      DB_SIDES.map((side) => DB_ROLES[side].group).sort(),
    );
  });

  it('a budget or retention the functions would refuse fails synthesis, naming the variable', () => {
    expect(() => pipelineConfig(BUDGET, { ...RETENTION, inboxMs: 2 * DAY })).toThrow(ConfigError);
    expect(() => pipelineConfig(BUDGET, { ...RETENTION, inboxMs: 2 * DAY })).toThrow(
      /INBOX_RETENTION_MS: \d+ must exceed RETRY_MAX_AGE_MS \+ REDRIVE_LIMIT × \(PARKING_RETENTION_MS \+ REDRIVE_WINDOW_MS \+ RETRY_MAX_AGE_MS\)/,
    );
    expect(() => pipelineConfig({ ...BUDGET, ladderMs: [10_000, 2_000] })).toThrow(
      /RETRY_LADDER_MS\.1: the ladder must not decrease/,
    );
  });

  it('a visibility timeout below 6 × the reserve timeout fails synthesis, naming both fields', () => {
    const config = pipelineConfig();
    expect(() =>
      validatePipelineConfig({
        ...config,
        sqs: { ...config.sqs, visibilityTimeoutSeconds: 6 * config.timeoutsSeconds.reserve - 1 },
      }),
    ).toThrow(
      /sqs\.visibilityTimeoutSeconds: 179 s must be at least 6 × timeoutsSeconds\.reserve \(6 × 30 s = 180 s\)/,
    );
  });
});
