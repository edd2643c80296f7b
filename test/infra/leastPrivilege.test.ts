import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, CfnResource, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type PipelineConfig,
  pipelineConfig,
  pipelineConfigFromContext,
} from '../../infra/config.js';
import { type DatabaseAccess, dataApiAccess } from '../../infra/constructs/index.js';
import { DataStack } from '../../infra/stacks/DataStack.js';
import { RabbitPipelineStack } from '../../infra/stacks/RabbitPipelineStack.js';
import { SqsPipelineStack } from '../../infra/stacks/SqsPipelineStack.js';
import { DB_ROLES, DB_SIDES, type DbSide } from '../../shared/pipeline/appRole.js';

/**
 * Least privilege in the templates: only migrate reads the Aurora master secret; every other
 * function reaches the Data API with its side's login secret and no other (broker-setup with
 * none); on Amazon MQ only broker-setup reads the administrator's secret, and the relay, reserve
 * and the event source use the pipeline user's.
 */

/** Logical ids of the CloudFormation resources under `scope` (a secret and its attachment). */
function logicalIds(scope: IConstruct | undefined): string[] {
  if (!scope) return [];
  return scope.node
    .findAll()
    .filter((c): c is CfnResource => c instanceof CfnResource)
    .map((c) => Stack.of(c).getLogicalId(c));
}

interface FunctionView {
  service: string;
  /** Its environment and every IAM policy attached to its role, as JSON text. */
  text: string;
}

/** Each function of the project (by its Powertools service name) with what it can reach. */
function functionsOf(template: Template): FunctionView[] {
  const fns = template.findResources('AWS::Lambda::Function');
  const policies = Object.values(template.findResources('AWS::IAM::Policy'));
  return Object.values(fns).flatMap((r) => {
    const props = r.Properties as {
      Environment?: { Variables?: Record<string, unknown> };
      Role: { 'Fn::GetAtt': [string, string] };
    };
    const service = props.Environment?.Variables?.POWERTOOLS_SERVICE_NAME;
    if (typeof service !== 'string') return [];
    const role = props.Role['Fn::GetAtt'][0];
    const own = policies.filter((p) =>
      JSON.stringify((p.Properties as { Roles: unknown }).Roles).includes(`"${role}"`),
    );
    return [{ service, text: JSON.stringify([props.Environment, own]) }];
  });
}

const mentions = (text: string, ids: string[]) => ids.some((id) => text.includes(id));

/** The side whose login each function uses (null: no database at all). */
const SIDE_OF: Record<string, DbSide | null> = {
  'place-order': 'orders',
  'order-results-sqs': 'orders',
  'order-results-rabbitmq': 'orders',
  'reserve-inventory-sqs': 'inventory',
  'reserve-inventory-rabbitmq': 'inventory',
  'outbox-relay': 'relay',
  maintenance: 'maintenance',
  'broker-setup': null,
};

/** Plain ARNs instead of a data stack (synthesizes faster; the grants are not what is read). */
const STAND_IN_DATABASE: DatabaseAccess = {
  clusterArn: 'arn:aws:rds:us-east-1:123456789012:cluster:stand-in',
  secretArns: {
    orders: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:orders',
    inventory: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:inventory',
    relay: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:relay',
    maintenance: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:maintenance',
  },
  databaseName: 'reliable_messaging',
  grant: () => {},
};

function synth() {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const data = new DataStack(app, 'Data');
  const database = dataApiAccess(data.cluster, data.databaseName, data.dbSecrets);
  const { inventoryDatabaseName } = data;
  const sqs = new SqsPipelineStack(app, 'Sqs', {
    config: pipelineConfig(),
    database,
    inventoryDatabaseName,
  });
  const rabbit = new RabbitPipelineStack(app, 'Rabbit', {
    config: pipelineConfig(),
    database,
    inventoryDatabaseName,
  });
  const master = logicalIds(data.cluster.node.findChild('Secret'));
  const sides = Object.fromEntries(
    DB_SIDES.map((side) => [side, logicalIds(data.dbSecrets[side].node.scope)]),
  ) as Record<DbSide, string[]>;
  return {
    data,
    rabbit,
    master,
    sides,
    templates: {
      data: Template.fromStack(data),
      sqs: Template.fromStack(sqs),
      rabbit: Template.fromStack(rabbit),
    },
  };
}

describe('CDK: least privilege', () => {
  let t: ReturnType<typeof synth>;
  beforeAll(() => {
    t = synth();
  }, 180_000);

  it('only migrate references the Aurora master secret', () => {
    expect(t.master.length).toBeGreaterThan(0);
    const data = functionsOf(t.templates.data);
    expect(data.filter((f) => mentions(f.text, t.master)).map((f) => f.service)).toEqual([
      'migrate',
    ]);
    // the pipeline stacks do not even import it
    for (const stack of ['sqs', 'rabbit'] as const) {
      const text = JSON.stringify(t.templates[stack].toJSON());
      expect(mentions(text, t.master), stack).toBe(false);
    }
  });

  it("each function reads only its own side's database secret; broker-setup reaches no database", () => {
    for (const side of DB_SIDES) {
      // a generated password for the side's login (the template also names the master's ARN,
      // which Secrets Manager's multi-user rotation reads; never its value)
      const secret = t.templates.data.toJSON().Resources[t.sides[side][0] ?? ''];
      expect(secret?.Type, side).toBe('AWS::SecretsManager::Secret');
      expect(JSON.stringify(secret.Properties.GenerateSecretString), side).toContain(
        `{\\"username\\":\\"${DB_ROLES[side].login}\\"`,
      );
    }
    for (const stack of ['sqs', 'rabbit'] as const) {
      const fns = functionsOf(t.templates[stack]);
      expect(fns.map((f) => f.service).sort(), stack).toEqual(
        Object.keys(SIDE_OF)
          .filter((s) => (stack === 'sqs' ? !/rabbitmq|broker/.test(s) : !s.endsWith('-sqs')))
          .sort(),
      );
      for (const f of fns) {
        const side = SIDE_OF[f.service];
        const reads = DB_SIDES.filter((s) => mentions(f.text, t.sides[s]));
        expect(reads, `${stack}/${f.service}`).toEqual(side ? [side] : []);
        expect(f.text.includes('rds-data:'), `${stack}/${f.service} rds-data`).toBe(side !== null);
        expect(/DATA_API_|DB_DRIVER/.test(f.text), `${stack}/${f.service} variables`).toBe(
          side !== null,
        );
      }
    }
  });

  it('migrate gets every login secret to create the users, as the master user, and both databases', () => {
    const migrate = functionsOf(t.templates.data).find((f) => f.service === 'migrate');
    for (const side of DB_SIDES) {
      expect(migrate?.text, side).toContain(`${DB_ROLES[side].group}=`);
      expect(mentions(migrate?.text ?? '', t.sides[side]), side).toBe(true);
    }
    expect(migrate?.text).toContain('"DATA_API_DATABASE":"reliable_messaging"');
    expect(migrate?.text).toContain('"INVENTORY_DATA_API_DATABASE":"reliable_messaging_inventory"');
    // no login but the sides' (the single-database layout's legacy login is gone)
    // the master's and one per side: no other login (the single-database layout's is gone)
    const secrets = Object.keys(t.templates.data.findResources('AWS::SecretsManager::Secret'));
    expect(secrets).toHaveLength(1 + DB_SIDES.length);
    const sides = new Set(DB_SIDES.flatMap((s) => t.sides[s]));
    expect(secrets.filter((id) => !sides.has(id))).toEqual([
      expect.stringMatching(/^DataDbSecret/),
    ]);
    // what the data stack exports: what the pipeline stacks import (the cluster, the sides' secrets)
    expect(JSON.stringify(t.templates.data.toJSON().Outputs ?? {})).not.toMatch(/AppSecret/);
  });

  it("both pipeline stacks output the cluster, each service's database and each side's secret for the operator", () => {
    for (const stack of ['sqs', 'rabbit'] as const) {
      const outputs = t.templates[stack].toJSON().Outputs as Record<string, { Value: unknown }>;
      expect(outputs.DatabaseName?.Value, stack).toBe('reliable_messaging');
      expect(outputs.InventoryDatabaseName?.Value, stack).toBe('reliable_messaging_inventory');
      expect(JSON.stringify(outputs.DatabaseClusterArn?.Value), stack).toContain(':cluster:');
      for (const [side, key] of [
        ['orders', 'OrdersDbSecretArn'],
        ['inventory', 'InventoryDbSecretArn'],
        ['relay', 'RelayDbSecretArn'],
        ['maintenance', 'MaintenanceDbSecretArn'],
      ] as const) {
        const value = JSON.stringify(outputs[key]?.Value);
        expect(mentions(value, t.sides[side]), `${stack} ${key}`).toBe(true);
      }
    }
  });

  it('reserve-inventory-sqs may send to its own source queue only in resend mode (and to parking in both)', () => {
    const sends = (config: PipelineConfig) => {
      const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
      const stack = new SqsPipelineStack(app, 'Sqs', {
        config,
        database: STAND_IN_DATABASE,
        inventoryDatabaseName: 'reliable_messaging_inventory',
        alarms: false,
        httpApi: false,
      });
      const template = Template.fromStack(stack);
      const reserve = functionsOf(template).find((f) => f.service === 'reserve-inventory-sqs');
      const id = (c: IConstruct) => stack.getLogicalId(c.node.defaultChild as CfnResource);
      const statements = JSON.parse(reserve?.text ?? '[]')[1].flatMap(
        (p: { Properties: { PolicyDocument: { Statement: unknown[] } } }) =>
          p.Properties.PolicyDocument.Statement,
      ) as { Action: string | string[]; Resource: unknown }[];
      const canSend = (queue: IConstruct) =>
        statements.some(
          (st) =>
            [st.Action].flat().includes('sqs:SendMessage') &&
            JSON.stringify(st.Resource).includes(`"${id(queue)}"`),
        );
      return { source: canSend(stack.source), parking: canSend(stack.parking) };
    };
    expect(pipelineConfig().sqs.retryMode).toBe('visibility');
    expect(sends(pipelineConfig())).toEqual({ source: false, parking: true });
    expect(sends(pipelineConfigFromContext({ sqs: { retryMode: 'resend' } }))).toEqual({
      source: true,
      parking: true,
    });
  }, 120_000);

  it('Amazon MQ: the administrator is the broker user; only broker-setup reads its secret', () => {
    const admin = logicalIds(t.rabbit.adminCredentials);
    const pipeline = logicalIds(t.rabbit.credentials);
    const broker = Object.values(t.templates.rabbit.findResources('AWS::AmazonMQ::Broker'))[0];
    expect(mentions(JSON.stringify(broker), admin)).toBe(true);
    expect(mentions(JSON.stringify(broker), pipeline)).toBe(false);

    const fns = functionsOf(t.templates.rabbit);
    expect(fns.filter((f) => mentions(f.text, admin)).map((f) => f.service)).toEqual([
      'broker-setup',
    ]);
    const setup = fns.find((f) => f.service === 'broker-setup');
    expect(setup?.text).toContain('BROKER_PIPELINE_SECRET_ARN');
    expect(
      fns
        .filter((f) => mentions(f.text, pipeline))
        .map((f) => f.service)
        .sort(),
    ).toEqual([
      'broker-setup',
      'order-results-rabbitmq',
      'outbox-relay',
      'reserve-inventory-rabbitmq',
    ]);
    t.templates.rabbit.hasResourceProperties('AWS::SecretsManager::Secret', {
      GenerateSecretString: { SecretStringTemplate: JSON.stringify({ username: 'admin' }) },
    });
  });

  it('Amazon MQ: every event source (reserve, order results) authenticates as the pipeline user', () => {
    const pipeline = logicalIds(t.rabbit.credentials);
    const admin = logicalIds(t.rabbit.adminCredentials);
    const mappings = Object.values(
      t.templates.rabbit.findResources('AWS::Lambda::EventSourceMapping'),
    ).map((m) => JSON.stringify(m));
    expect(mappings).toHaveLength(2);
    for (const mapping of mappings) {
      expect(mapping).toContain('BASIC_AUTH');
      expect(mentions(mapping, pipeline)).toBe(true);
      expect(mentions(mapping, admin)).toBe(false);
    }
  });
});

describe('cdk-nag acknowledgments that point at docs/deploy.md', () => {
  const root = join(import.meta.dirname, '..', '..');
  const deploy = readFileSync(join(root, 'docs', 'deploy.md'), 'utf8');
  const reasons = [
    'infra/constructs/ServerlessDatabase.ts',
    'infra/stacks/RabbitPipelineStack.ts',
  ].flatMap((file) =>
    [...readFileSync(join(root, file), 'utf8').matchAll(/docs\/deploy\.md, "([^"]+)"/g)].map(
      (m) => ({ file, section: m[1] as string }),
    ),
  );

  it('finds the secret-rotation acknowledgments (Aurora and Amazon MQ)', () => {
    expect([
      ...new Set(reasons.filter((r) => r.section === 'Secret rotation').map((r) => r.file)),
    ]).toEqual(['infra/constructs/ServerlessDatabase.ts', 'infra/stacks/RabbitPipelineStack.ts']);
  });

  it.each(reasons.map((r) => [r.section, r.file]))(
    'docs/deploy.md has the section "%s" that %s points at',
    (section) => {
      expect(deploy).toMatch(new RegExp(`^## ${section}$`, 'm'));
    },
  );

  it('its "Secret rotation" says how to rotate every secret the stacks create', () => {
    const start = deploy.indexOf('## Secret rotation');
    expect(start).toBeGreaterThan(-1);
    const rotation = deploy.slice(start, deploy.indexOf('\n## ', start + 1));
    for (const secret of [
      'Aurora master user',
      'Side logins',
      'Broker `pipeline` user',
      'Broker `admin` user',
    ]) {
      expect(rotation).toContain(`_${secret}`);
    }
    // the single-database layout's legacy login is gone
    expect(rotation).not.toMatch(/pipeline_fn|legacyAppLogin/);
  });
});
