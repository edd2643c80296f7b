import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SubscribeCommand } from '@aws-sdk/client-sns';
import { CreateQueueCommand, GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DeployedAssembly } from '../../devkit/lambda/assembly.js';
import { startSqsEventSource } from '../../devkit/lambda/eventSources.js';
import { LocalDeployment } from '../../devkit/lambda/LocalDeployment.js';
import { localStackOutputs } from '../../devkit/lambda/localStack.js';
import { createScratchDatabase, type ScratchDatabase } from '../../devkit/scratch.js';
import { waitFor } from '../../devkit/waitFor.js';
import { createSnsClient, createSqsClient } from '../../shared/transport/sqs/index.js';
import { type BundleRig, bundleRig } from '../helpers/bundles.js';
import { packLibrary, ROOT, runIn, scratchProject, TSC } from '../helpers/packedLibrary.js';
import {
  AMQP_URL,
  DATABASE_URL,
  RABBITMQ_MANAGEMENT_URL,
  uniqueName,
} from '../helpers/services.js';
import { receiveAll } from '../helpers/sqs.js';

/**
 * Another team's service deployed beside the reference deployment, as docs/use-in-your-service.md
 * says: `examples/shipping` in an empty project that installs the packed library, its CDK app
 * synthesized there with the library's constructs (`npx cdk synth`, esbuild bundling), and its
 * synthesized bundles run on the local deployment next to the reference deployment's SQS bundles:
 * an order placed through the reference API is reserved, inventory's event fans out through its
 * topic to the order side's queue and to shipping's, shipping schedules the shipment in its own
 * database and its relay publishes `shipping.scheduled` to its own topic.
 */
const services = inject('services');
const fauxqs = services.sqs.find((s) => s.name === 'fauxqs');
const moto = services.sqs.find((s) => s.name === 'moto');

describe.skipIf(!moto || !fauxqs)(
  'a second team’s service from the packed library, deployed beside the reference deployment (SQS fan-out)',
  () => {
    let work: string;
    let app: string;
    let reference: BundleRig;
    let shippingDb: ScratchDatabase;
    let shipping: LocalDeployment;
    const name = uniqueName('shipping_dep');
    const stops: (() => Promise<unknown>)[] = [];
    /** What shipping's functions logged (shown when a wait fails). */
    const logs: string[] = [];
    const explained = async <T>(wait: Promise<T>): Promise<T> => {
      try {
        return await wait;
      } catch (err) {
        const theirs = [...reference.logs.entries()].flatMap(([fn, lines]) =>
          lines.slice(-5).map((l) => `${fn}: ${l}`),
        );
        throw new Error(
          `${(err as Error).message}\nshipping logged:\n${logs.slice(-30).join('\n')}\nthe reference deployment logged:\n${theirs.join('\n')}`,
        );
      }
    };
    let api: { url: string; close(): Promise<void> };
    let observerUrl: string;
    const sqs = createSqsClient({ endpoint: fauxqs?.endpoint, region: 'us-east-1' });

    beforeAll(async () => {
      // the reference deployment (SQS), deployed: its migrations, its HTTP API, its consumers
      reference = await bundleRig('sqs', 'shipping_ref');
      stops.push(() => reference.close());
      await reference.pipeline.deploy();
      api = await reference.deployment.startHttpApi();
      stops.push(() => api.close());
      for (const fn of ['reserve-inventory-sqs', 'order-results-sqs']) {
        const source = await startSqsEventSource(reference.deployment, fn);
        stops.push(() => source.stop());
      }
      const refStack = reference.deployment.assembly.stacks.find(
        (s) => s.template.Outputs?.InventoryEventsTopic,
      );
      const { outputs } = localStackOutputs(reference.deployment, refStack?.stackName ?? '');
      const inventoryTopicArn = outputs.InventoryEventsTopic as string;
      expect(inventoryTopicArn).toMatch(/^arn:aws:sns:/);

      // the guide's project: the tarball, its CDK app's tools
      work = await mkdtemp(join(tmpdir(), 'rms-shipping-deployed-'));
      app = join(work, 'shipping');
      const { tarball } = await packLibrary(work);
      const pkg = (await import('../../package.json', { with: { type: 'json' } })).default;
      const dev = pkg.devDependencies as Record<string, string>;
      await scratchProject(app, [
        tarball,
        `zod@${pkg.dependencies.zod}`,
        '@types/node@24',
        ...['aws-cdk', 'aws-cdk-lib', 'constructs', 'esbuild', 'tsx'].map((p) => `${p}@${dev[p]}`),
      ]);
      for (const part of ['src', 'migrations', 'infra', 'tsconfig.json', 'cdk.json']) {
        await cp(join(ROOT, 'examples', 'shipping', part), join(app, part), { recursive: true });
      }
      const built = await runIn(app, TSC, ['-p', 'tsconfig.json', '--noEmit']);
      expect(built.output).toBe('');
      const synth = await runIn(
        app,
        join(app, 'node_modules', '.bin', 'cdk'),
        [
          'synth',
          '--quiet',
          '--no-notices',
          '-c',
          `inventoryTopicArn=${inventoryTopicArn}`,
          '-o',
          'cdk.out',
        ],
        { PATH: `${join(app, 'node_modules', '.bin')}:${process.env.PATH ?? ''}` },
      );
      expect(synth.code, synth.output).toBe(0);

      // its synthesized bundles on the local deployment: a database of its own, the same SQS
      // server (so inventory's topic reaches its queue)
      shippingDb = await createScratchDatabase(DATABASE_URL, name, { migrated: false });
      stops.push(async () => {
        await shippingDb.drop();
        const admin = new pg.Client({ connectionString: DATABASE_URL });
        await admin.connect();
        for (const user of ['shipping_fn', 'shipping_relay_fn']) {
          await admin.query(`DROP ROLE IF EXISTS ${name}_${user}`).catch(() => {});
        }
        await admin.end();
      });
      const master = new URL(shippingDb.url);
      shipping = await LocalDeployment.start(new DeployedAssembly(join(app, 'cdk.out')), {
        services: {
          databaseUrl: shippingDb.url,
          amqpUrl: AMQP_URL,
          managementUrl: RABBITMQ_MANAGEMENT_URL,
          sqsEndpoint: fauxqs?.endpoint,
          secretsEndpoint: moto?.endpoint,
        },
        sqsQueuePrefix: `${name.replace(/_/g, '-')}-`,
        onLog: (fn, line) => logs.push(`${fn}: ${line}`),
        // the master's secret is the local server's user; each login a user of this run's own
        secretValue: ({ path, generated }) =>
          path.endsWith('/Db/Secret')
            ? {
                ...generated,
                username: decodeURIComponent(master.username || 'postgres'),
                password: decodeURIComponent(master.password) || 'local',
              }
            : { ...generated, username: `${name}_${generated.username}` },
      });
      stops.push(() => shipping.stop());
      const migrated = await shipping.customResource('Migrations', 'Create');
      expect(migrated).toMatchObject({ status: 'SUCCESS' });
      const consumer = await startSqsEventSource(shipping, 'shipping');
      stops.push(() => consumer.stop());

      // a subscriber of shipping's own events (the next team)
      const shippingTopic = localStackOutputs(
        shipping,
        shipping.assembly.stacks[0]?.stackName ?? '',
      ).outputs.ShippingEventsTopic as string;
      observerUrl = (
        await sqs.send(new CreateQueueCommand({ QueueName: `${name.replace(/_/g, '-')}-observer` }))
      ).QueueUrl as string;
      const observerArn = (
        await sqs.send(
          new GetQueueAttributesCommand({ QueueUrl: observerUrl, AttributeNames: ['QueueArn'] }),
        )
      ).Attributes?.QueueArn as string;
      const sns = createSnsClient({ endpoint: fauxqs?.endpoint, region: 'us-east-1' });
      await sns.send(
        new SubscribeCommand({
          TopicArn: shippingTopic,
          Protocol: 'sqs',
          Endpoint: observerArn,
          Attributes: { RawMessageDelivery: 'true' },
        }),
      );
      sns.destroy();
    }, 600_000);

    afterAll(async () => {
      for (const stop of stops.reverse()) await stop().catch(() => {});
      sqs.destroy();
      if (work) await rm(work, { recursive: true, force: true });
    }, 120_000);

    it('an order reserved by the reference deployment is shipped once by the second service, which publishes its own event; the order side got the result too', {
      timeout: 180_000,
    }, async () => {
      await reference.inventoryDb.query("INSERT INTO stock (sku, available) VALUES ('SKU-S', 10)");
      const res = await fetch(`${api.url}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-correlation-id': 'shipping-deployed' },
        body: JSON.stringify({ sku: 'SKU-S', quantity: 3 }),
      });
      expect(res.status).toBe(201);
      const { orderId } = (await res.json()) as { orderId: string };

      // shipping's effect, in its own database, once
      await explained(
        waitFor(
          async () =>
            (await shippingDb.db.query('SELECT 1 FROM shipments WHERE order_id = $1', [orderId]))
              .rows.length === 1,
          { timeoutMs: 60_000, message: 'the shipment scheduled in the shipping database' },
        ),
      );
      const { rows } = await shippingDb.db.query<{ sku: string; quantity: number; inbox: number }>(
        `SELECT sku, quantity,
                (SELECT count(*)::int FROM processed_messages WHERE consumer_name = 'shipping') AS inbox
           FROM shipments WHERE order_id = $1`,
        [orderId],
      );
      expect(rows).toEqual([{ sku: 'SKU-S', quantity: 3, inbox: 1 }]);

      // its relay (kicked by its consumer) published shipping.scheduled to its topic
      const observed = await explained(receiveAll(sqs, observerUrl, (m) => m.length >= 1, 60_000));
      expect(observed.map((m) => JSON.parse(m.Body ?? '{}'))).toMatchObject([
        {
          type: 'shipping.scheduled',
          aggregate: { id: orderId },
          correlation_id: 'shipping-deployed',
        },
      ]);
      await waitFor(
        async () =>
          (
            await shippingDb.db.query(
              'SELECT 1 FROM shipping_outbox WHERE published_at IS NOT NULL',
            )
          ).rows.length === 1,
        { message: "shipping's outbox row marked published" },
      );

      // the other subscriber of inventory's topic: the order shows its reservation
      await waitFor(
        async () =>
          (
            await reference.db.db.query<{ s: string }>(
              'SELECT reservation_status AS s FROM orders WHERE id = $1',
              [orderId],
            )
          ).rows[0]?.s === 'reserved',
        { timeoutMs: 30_000, message: 'the order shows its reservation' },
      );

      // each of shipping's functions reached its database as its own login
      const { rows: sessions } = await shippingDb.db.query<{ usename: string }>(
        'SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = $1 ORDER BY 1',
        [shippingDb.name],
      );
      expect(sessions.map((s) => s.usename)).toEqual(
        expect.arrayContaining([`${name}_shipping_fn`, `${name}_shipping_relay_fn`]),
      );
    });
  },
);
