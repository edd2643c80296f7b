import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  type PackedFile,
  packLibrary,
  ROOT,
  runIn,
  scratchProject,
  TSC,
} from '../helpers/packedLibrary.js';

/**
 * The package as another team gets it: `npm pack`, installed from the tarball into an empty
 * project, type-checked there and run on Node 22 and Node 24.
 */
const PACKAGE = 'reliable-messaging-serverless';
const NODE_22 = 'node@22';
const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  exports: Record<string, string | { types: string; default: string }>;
};

/**
 * Every entry point used once, a message published and consumed through the in-memory backend, and
 * a stack of the CDK constructs synthesized (the library's migrations found in the package).
 */
const SMOKE = `
import { fileURLToPath } from 'node:url';
import { App, Stack } from 'aws-cdk-lib';
import { type MessageHandler, newEnvelope, OutboxStore, type Outcome } from '${PACKAGE}';
import { PipelineAlarms, ServerlessDatabase, SqsConsumer } from '${PACKAGE}/cdk';
import { DataApiDatabase } from '${PACKAGE}/data-api';
import { memoryModule } from '${PACKAGE}/memory';
import { natsModule } from '${PACKAGE}/nats';
import { PgDatabase } from '${PACKAGE}/pg';
import { rabbitmqModule } from '${PACKAGE}/rabbitmq';
import { sqsModule } from '${PACKAGE}/sqs';
import { memoryBackend } from '${PACKAGE}/testing';

const seen: string[] = [];
const handler: MessageHandler = async (messages) =>
  messages.map((m): Outcome => {
    seen.push(m.messageId ?? '');
    return { kind: 'ack', result: 'shipped' };
  });
const backend = memoryBackend({ streams: ['shipping_outbox'] });
await backend.prepare();
const envelope = newEnvelope({
  type: 'shipment.sent',
  aggregate: { type: 'shipment', id: 's-1', version: 1 },
  data: { orderId: 'o-1' },
  producer: 'shipping',
  correlationId: 'c-1',
});
const [published] = await backend.publisher('shipping_outbox').publish([envelope]);
const consumer = await backend.consume(handler);
for (let i = 0; i < 250 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
await consumer.stop();
await backend.close();
const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
const stack = new Stack(app, 'Smoke');
const entry = fileURLToPath(import.meta.url);
const db = new ServerlessDatabase(stack, 'Db', {
  logins: { consumer: { username: 'consumer_fn', group: 'consumer_app' } },
  migrate: { entry },
});
new SqsConsumer(stack, 'Consumer', { entry, database: db.login('consumer') }).addAlarms(
  new PipelineAlarms(stack, 'Alarms'),
);
const resources = Object.values(
  app.synth().getStackByName('Smoke').template.Resources as Record<string, { Type: string }>,
);
console.log(JSON.stringify({
  published: published?.ok,
  consumed: seen[0] === envelope.id,
  table: new OutboxStore('shipping_outbox').table,
  transports: [rabbitmqModule, sqsModule, natsModule, memoryModule].map((m) => m.name),
  adapters: [PgDatabase, DataApiDatabase].map((c) => typeof c),
  node: Number(process.versions.node.split('.')[0]),
  cdk: {
    queues: resources.filter((r) => r.Type === 'AWS::SQS::Queue').length,
    migrations: resources.filter((r) => r.Type === 'Custom::Migrations').length,
  },
}));
`;

/**
 * A handler of the project for the conformance kit, in plain JavaScript as a user's build emits
 * it: an \`inboxHandler\` whose effect is a row of its own table, written in the transaction.
 */
const SUBJECT = `
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { inboxHandler } from '${PACKAGE}';

const paid = z.object({ orderId: z.uuid() });
const sql = 'CREATE TABLE shipments (message_id uuid NOT NULL)';
export default {
  consumer: 'shipping',
  outboxes: [],
  migrations: () => [{ name: '0001_shipments', sql, checksum: '1' }],
  handler: ({ db, budget }) =>
    inboxHandler({
      db,
      budget,
      consumer: 'shipping',
      types: ['order.paid'],
      schemaFor: (type, major) => (type === 'order.paid' && major === 1 ? paid : undefined),
      async apply(tx, envelope) {
        await tx.query('INSERT INTO shipments (message_id) VALUES ($1)', [envelope.id]);
        return 'shipped';
      },
    }),
  event: (i) => {
    const orderId = randomUUID();
    return {
      type: 'order.paid',
      aggregate: { type: 'order', id: orderId, version: 1 },
      data: { orderId },
      correlationId: \`c-\${i}\`,
      producer: 'orders',
    };
  },
  async effects(db) {
    const { rows } = await db.query(
      'SELECT message_id::text AS id, count(*)::int AS n FROM shipments GROUP BY 1',
    );
    return new Map(rows.map((r) => [r.id, r.n]));
  },
};
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'es2024',
    module: 'nodenext',
    moduleResolution: 'nodenext',
    lib: ['es2024'],
    types: ['node'],
    strict: true,
    // TypeScript's own default for a new project; the strict pass below checks the package's files
    skipLibCheck: true,
    outDir: 'out',
  },
  files: ['smoke.ts'],
};

/** Bare module names a file imports (`from 'x'`, `import('x')`, `import 'x'`), with relative ones. */
function specifiers(source: string): string[] {
  const found = source.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"]([^'"]+)['"]/g);
  return [...found].map((m) => m[1] as string);
}
const packageName = (spec: string) =>
  spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] as string);

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

describe('the packed library, installed in an empty project', () => {
  let work: string;
  let app: string;
  let files: PackedFile[];
  let installed: string;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'rms-pack-'));
    app = join(work, 'app');
    const packed = await packLibrary(work);
    files = packed.files;
    await scratchProject(app, [
      packed.tarball,
      '@types/node@24',
      NODE_22,
      // the CDK entry's peer dependencies, as a CDK app has them
      `aws-cdk-lib@${pkg.devDependencies['aws-cdk-lib']}`,
      `constructs@${pkg.devDependencies.constructs}`,
    ]);
    installed = join(app, 'node_modules', PACKAGE);
    await writeFile(join(app, 'smoke.ts'), SMOKE);
    await writeFile(join(app, 'subject.mjs'), SUBJECT);
    await writeFile(join(app, 'tsconfig.json'), JSON.stringify(TSCONFIG));
  }, 240_000);
  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('holds the built entry points, the migrations and nothing of the repository besides', () => {
    const outside = files
      .map((f) => f.path)
      .filter(
        (p) =>
          !/^dist\/(shared|infra)\/.+\.(js|d\.ts)$/.test(p) &&
          !/^dist\/shared\/db\/migrations\/\d{4}_[a-z0-9_]+\.sql$/.test(p),
      )
      .sort();
    expect(outside).toEqual(['CHANGELOG.md', 'LICENSE', 'README.md', 'package.json']);
    for (const target of Object.values(pkg.exports)) {
      if (typeof target === 'string') continue;
      for (const path of [target.types, target.default]) {
        expect(files.map((f) => f.path)).toContain(relative('.', path));
      }
    }
  });

  it('imports only its own files, Node built-ins, its dependencies and peer dependencies (no devDependency)', async () => {
    const builtins = new Set(builtinModules);
    const problems: string[] = [];
    for (const file of await filesUnder(join(installed, 'dist'))) {
      for (const spec of specifiers(await readFile(file, 'utf8'))) {
        const where = relative(installed, file);
        if (spec.startsWith('.')) {
          const target = resolve(dirname(file), spec);
          if (relative(installed, target).startsWith('..')) problems.push(`${where}: ${spec}`);
        } else if (spec.startsWith('node:') || builtins.has(spec)) {
        } else {
          const name = packageName(spec);
          const typesOnly = file.endsWith('.d.ts') && `@types/${name}` in pkg.dependencies;
          const declared = name in pkg.dependencies || name in pkg.peerDependencies;
          if (!declared && !typesOnly) problems.push(`${where}: ${spec}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('type-checks a program that uses every entry point', async () => {
    const checked = await runIn(app, TSC, ['-p', '.', '--noEmit']);
    expect(checked.output).toBe('');
    expect(checked.code).toBe(0);
    // with the declarations checked too: none of the errors is in the package's files
    const strict = await runIn(app, TSC, ['-p', '.', '--noEmit', '--skipLibCheck', 'false']);
    const ours = strict.output
      .split('\n')
      .filter((l) => l.includes(PACKAGE) || l.startsWith('smoke'));
    expect(ours).toEqual([]);
  });

  it('runs on Node 24 and Node 22: a message published and consumed', async () => {
    const built = await runIn(app, TSC, ['-p', '.']);
    expect(built.code, built.output).toBe(0);
    const nodes = [process.execPath, join(app, 'node_modules', '.bin', 'node')];
    const majors: number[] = [];
    for (const node of nodes) {
      const ran = await runIn(app, node, [join('out', 'smoke.js')]);
      expect(ran.code, ran.output).toBe(0);
      const result = JSON.parse(ran.output.trim().split('\n').at(-1) as string);
      expect(result).toMatchObject({
        published: true,
        consumed: true,
        table: 'shipping_outbox',
        transports: ['rabbitmq', 'sqs', 'nats-jetstream', 'memory'],
        adapters: ['function', 'function'],
        cdk: { queues: 2, migrations: 1 },
      });
      majors.push(result.node);
    }
    expect(majors.sort()).toEqual([22, 24]);
  });

  it('runs the conformance kit from its bin with plain node, its consumer process included', async () => {
    const bin = join(app, 'node_modules', '.bin', PACKAGE);
    expect(await readFile(bin, 'utf8')).toMatch(/^#!\/usr\/bin\/env node\n/);
    const services = inject('services');
    const env = {
      DATABASE_URL: services.databaseUrl,
      AMQP_URL: services.amqpUrl,
      RABBITMQ_MANAGEMENT_URL: services.managementUrl,
    };
    const conformance = (transport: string, scenarios: string) =>
      runIn(
        app,
        process.execPath,
        [bin, 'conformance', '--handler', 'subject.mjs', '--transport', transport].concat([
          '--scenario',
          scenarios,
          '--events',
          '3',
          '--out',
          join('reports', transport),
        ]),
        env,
      );
    const memory = await conformance('memory', 'duplicates,rollback-after-effect');
    expect(memory.code, memory.output).toBe(0);
    // a child process of the kit, started from the installed package with plain node
    const killed = await conformance('rabbitmq', 'killed-process');
    expect(killed.code, killed.output).toBe(0);
    for (const transport of ['memory', 'rabbitmq']) {
      const report = JSON.parse(
        await readFile(join(app, 'reports', transport, 'conformance.json'), 'utf8'),
      );
      expect(report).toMatchObject({ transport, passed: true, events: 3 });
    }
  }, 120_000);
});
