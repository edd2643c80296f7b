import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, CfnResource, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { pipelineConfig } from '../../infra/config.js';
import { DataStack } from '../../infra/stacks/DataStack.js';
import { RabbitPipelineStack } from '../../infra/stacks/RabbitPipelineStack.js';
import { dataApiAccess, SqsPipelineStack } from '../../infra/stacks/SqsPipelineStack.js';
import { APP_LOGIN_USER } from '../../shared/db/appRole.js';

/**
 * Least privilege in the templates: only migrate reads the Aurora master secret (every other
 * function reaches the Data API with the app user's secret); on Amazon MQ only broker-setup reads
 * the administrator's secret, and the relay, reserve and the event source use the pipeline user's.
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

function synth() {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const data = new DataStack(app, 'Data');
  const database = dataApiAccess(data.cluster, data.databaseName, data.appSecret);
  const sqs = new SqsPipelineStack(app, 'Sqs', { config: pipelineConfig(), database });
  const rabbit = new RabbitPipelineStack(app, 'Rabbit', { config: pipelineConfig(), database });
  const master = logicalIds(data.cluster.node.findChild('Secret'));
  const appSecret = logicalIds(data.node.tryFindChild('AppSecret'));
  return {
    data,
    rabbit,
    master,
    appSecret,
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

  it('every other function reaches the Data API with the app secret; migrate gets its ARN to create the user', () => {
    // a generated password for the app user (the template also names the master's ARN, which
    // Secrets Manager's multi-user rotation reads; never its value)
    const appSecret = t.templates.data.toJSON().Resources[t.appSecret[0] ?? ''];
    expect(appSecret?.Type).toBe('AWS::SecretsManager::Secret');
    expect(JSON.stringify(appSecret.Properties.GenerateSecretString)).toContain(
      `{\\"username\\":\\"${APP_LOGIN_USER}\\"`,
    );
    const migrate = functionsOf(t.templates.data).find((f) => f.service === 'migrate');
    expect(migrate?.text).toContain('APP_DB_SECRET_ARN');
    expect(mentions(migrate?.text ?? '', t.appSecret)).toBe(true);
    for (const stack of ['sqs', 'rabbit'] as const) {
      const fns = functionsOf(t.templates[stack]).filter((f) => f.text.includes('DATA_API_'));
      expect(fns.length, stack).toBeGreaterThanOrEqual(4);
      for (const f of fns) {
        expect(mentions(f.text, t.appSecret), `${stack}/${f.service}`).toBe(true);
      }
    }
  });

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

describe('cdk-nag acknowledgments that point at the README', () => {
  const root = join(import.meta.dirname, '..', '..');
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const reasons = ['infra/stacks/DataStack.ts', 'infra/stacks/RabbitPipelineStack.ts'].flatMap(
    (file) =>
      [...readFileSync(join(root, file), 'utf8').matchAll(/README, "([^"]+)"/g)].map((m) => ({
        file,
        section: m[1] as string,
      })),
  );

  it('finds the secret-rotation acknowledgments (Aurora and Amazon MQ)', () => {
    expect(reasons.filter((r) => r.section === 'Secret rotation').map((r) => r.file)).toEqual([
      'infra/stacks/DataStack.ts',
      'infra/stacks/RabbitPipelineStack.ts',
    ]);
  });

  it.each(reasons.map((r) => [r.section, r.file]))(
    'the README has the section "%s" that %s points at',
    (section) => {
      expect(readme).toContain(`**${section}.**`);
    },
  );

  it('the README\'s "Secret rotation" says how to rotate every secret the stacks create', () => {
    const start = readme.indexOf('**Secret rotation.**');
    expect(start).toBeGreaterThan(-1);
    const rotation = readme.slice(start, readme.indexOf('\n**', start + 1));
    for (const secret of [
      'Aurora master user',
      'App user',
      'Broker `pipeline` user',
      'Broker `admin` user',
    ]) {
      expect(rotation).toContain(`_${secret}`);
    }
  });
});
