import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startMotoServer } from '../../devkit/emulators/motoServer.js';
import { startLoopbackFauxqs } from '../../devkit/emulators/sqsServer.js';
import { type RunningEventSource, startSqsEventSource } from '../../devkit/lambda/eventSources.js';
import {
  localStackOutputs,
  type PublishedStack,
  publishStackOutputs,
} from '../../devkit/lambda/localStack.js';
import { waitFor } from '../../devkit/waitFor.js';
import { STACK_OUTPUTS } from '../../infra/stackOutputs.js';
import { encodeEnvelope, newEnvelope } from '../../shared/index.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { createSqsClient, envelopeAttributes } from '../../shared/transport/sqs/index.js';
import { type BundleRig, bundleRig } from '../helpers/bundles.js';
import { type RecordedRequest, recordingProxy, sigV4Problem } from '../helpers/sigv4.js';

const execFileP = promisify(execFile);

/**
 * The operator's CLI against a deployment, run as an operator runs it: a child process
 * (`tsx bin/cli.ts … --stack <name>`) with only AWS credentials, a region and the SDK's
 * `AWS_ENDPOINT_URL_<SERVICE>` variables. The deployment is the SQS stack as synthesized, stood up
 * locally (its bundles, the Data API endpoint over a scratch database, secrets in moto, queues
 * under their pinned names on a fauxqs server of this file, Lambda's Invoke endpoint, the HTTP
 * API), and a stack of that name in moto's CloudFormation whose outputs are the template's,
 * resolved to those stand-ins. The relay is not kicked (`relay.kick: false`), so only `relay drain`
 * moves an order's events.
 */
describe('the CLI against a deployed stack (--stack), the SQS stack stood up locally', () => {
  let f: BundleRig;
  let fauxqs: Awaited<ReturnType<typeof startLoopbackFauxqs>>;
  let moto: { endpoint: string; stop(): Promise<void> } | undefined;
  let proxy: Awaited<ReturnType<typeof recordingProxy>>;
  let sqs: SQSClient;
  let home: string;
  const published: PublishedStack[] = [];
  const sources: RunningEventSource[] = [];
  const credentials = { accessKeyId: 'AKIDCLITEST', secretAccessKey: 'cli-test-secret-key' };
  let stackName = '';
  let partialName = '';
  let noSecretName = '';
  /** What the CLI's environment holds: credentials, the region, the endpoints. Nothing else. */
  let aws: Record<string, string> = {};
  const order = { orderId: '' };

  const cli = async (args: string[], env: Record<string, string> = aws) => {
    try {
      const out = await execFileP(process.execPath, ['--import', 'tsx', 'bin/cli.ts', ...args], {
        // no DATABASE_URL, AMQP_URL, SQS_ENDPOINT: what the CLI reaches comes from the stack
        env: {
          PATH: process.env.PATH ?? '',
          HOME: home,
          AWS_EC2_METADATA_DISABLED: 'true',
          ...env,
        },
        timeout: 120_000,
      });
      return { code: 0, stdout: out.stdout, stderr: out.stderr };
    } catch (err) {
      const e = err as { code?: number; stdout?: string; stderr?: string };
      return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
    }
  };
  const lastApiRequest = (): RecordedRequest => proxy.requests.at(-1) as RecordedRequest;

  beforeAll(async () => {
    home = await mkdtemp(join(tmpdir(), 'cli-home-'));
    // queues under their pinned names (as in an account), so on a server of this file's own
    fauxqs = await startLoopbackFauxqs({ port: 0, logger: false });
    f = await bundleRig('sqs', 'cli_stack', {
      context: { pipeline: JSON.stringify({ relay: { kick: false } }) },
      sqs: { endpoint: `http://127.0.0.1:${fauxqs.port}` },
    });
    await f.pipeline.deploy();
    const api = await f.deployment.startHttpApi();
    // the local HTTP API checks no IAM authorization: the proxy keeps each request to check it
    proxy = await recordingProxy(api.url);
    sqs = createSqsClient({ endpoint: f.deployment.sqsEndpoint, maxAttempts: 1 });

    let cfnEndpoint = inject('services').sqs.find((s) => s.name === 'moto')?.endpoint;
    if (!cfnEndpoint) {
      moto = await startMotoServer();
      cfnEndpoint = moto.endpoint;
    }
    const { outputs } = localStackOutputs(f.deployment, 'ReliableMessagingSqs', {
      [STACK_OUTPUTS.apiUrl]: proxy.url,
    });
    stackName = `ReliableMessagingSqs-${f.name.replace(/_/g, '-')}`;
    partialName = `${stackName}-old`;
    published.push(await publishStackOutputs({ endpoint: cfnEndpoint, stackName, outputs }));
    const { [STACK_OUTPUTS.relayFunction]: _relay, ...older } = outputs;
    published.push(
      await publishStackOutputs({ endpoint: cfnEndpoint, stackName: partialName, outputs: older }),
    );
    // a login whose secret is gone (or that the operator may not read)
    noSecretName = `${stackName}-nosecret`;
    published.push(
      await publishStackOutputs({
        endpoint: cfnEndpoint,
        stackName: noSecretName,
        outputs: {
          ...outputs,
          [STACK_OUTPUTS.inventoryDbSecretArn]: `arn:aws:secretsmanager:${f.deployment.region}:000000000000:secret:gone`,
        },
      }),
    );
    const platform = f.deployment.platformEnv;
    aws = {
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      AWS_REGION: f.deployment.region,
      AWS_ENDPOINT_URL_CLOUDFORMATION: cfnEndpoint,
      AWS_ENDPOINT_URL_RDS_DATA: platform.AWS_ENDPOINT_URL_RDS_DATA as string,
      AWS_ENDPOINT_URL_LAMBDA: platform.AWS_ENDPOINT_URL_LAMBDA as string,
      AWS_ENDPOINT_URL_SQS: platform.AWS_ENDPOINT_URL_SQS as string,
    };
  }, 400_000);

  afterAll(async () => {
    for (const s of sources) await s.stop().catch(() => {});
    for (const p of published) await p.delete().catch(() => {});
    sqs?.destroy();
    await proxy?.close();
    await f?.close();
    await fauxqs?.stop();
    await moto?.stop();
    if (home) await rm(home, { recursive: true, force: true });
  }, 60_000);

  it('no credentials, a stack that does not exist, a secret the Data API cannot read, a stack without the output: one line naming it, exit 2', async () => {
    const { AWS_ACCESS_KEY_ID: _k, AWS_SECRET_ACCESS_KEY: _s, ...noCredentials } = aws;
    const missing = await cli(['outbox', 'status', '--stack', stackName], noCredentials);
    expect(missing.code).toBe(2);
    expect(missing.stderr.trim()).toMatch(new RegExp(`^--stack ${stackName}: no AWS credentials`));
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);

    const none = await cli(['stock', 'set', 'SKU-1', '1', '--stack', 'NoSuchStack']);
    expect(none).toMatchObject({
      code: 2,
      stderr: 'stack NoSuchStack does not exist in us-east-1\n',
    });

    const refused = await cli(['stock', 'set', 'SKU-1', '1', '--stack', noSecretName]);
    expect(refused.code).toBe(2);
    expect(refused.stderr.trim()).toMatch(
      new RegExp(
        `^stack ${noSecretName}: the Data API refused the call as the inventory login .*BadRequestException: secret arn:aws:secretsmanager:.*:secret:gone`,
      ),
    );
    expect(refused.stderr.trim().split('\n')).toHaveLength(1);

    const old = await cli(['relay', 'drain', '--stack', partialName]);
    expect(old.code).toBe(2);
    expect(old.stderr.trim()).toMatch(
      new RegExp(`^stack ${partialName} .* has no output RelayFunction`),
    );
    expect(old.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('stock set SKU-1 100 --stack: the stock row written through the Data API', async () => {
    f.deployment.calls.reset();
    const out = await cli(['stock', 'set', 'SKU-1', '100', '--stack', stackName]);
    expect(out).toMatchObject({ code: 0, stdout: 'SKU-1: available 100, reserved 0\n' });
    const { rows } = await f.inventoryDb.query("SELECT available FROM stock WHERE sku = 'SKU-1'");
    expect(rows).toEqual([{ available: 100 }]);
    expect(f.deployment.calls.counts()['rds-data:Execute']).toBeGreaterThan(0);
  });

  it("orders place --stack: POST /orders on the stack's ApiUrl, signed with SigV4 for execute-api in its region", async () => {
    const out = await cli([
      'orders',
      'place',
      '--sku',
      'SKU-1',
      '--quantity',
      '2',
      '--stack',
      stackName,
    ]);
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/^201 Created\n/);
    Object.assign(order, JSON.parse(out.stdout.slice(out.stdout.indexOf('\n') + 1)));
    expect(order.orderId).toMatch(/^[0-9a-f-]{36}$/);
    const request = lastApiRequest();
    expect(request).toMatchObject({ method: 'POST', url: '/orders' });
    expect(String(request.headers.authorization)).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIDCLITEST\/\d{8}\/us-east-1\/execute-api\/aws4_request, SignedHeaders=[^,]*host[^,]*, Signature=[0-9a-f]{64}$/,
    );
    expect(
      await sigV4Problem(request, { credentials, region: 'us-east-1', service: 'execute-api' }),
    ).toBeUndefined();
    // and the check can fail: another secret does not give that signature
    expect(
      await sigV4Problem(request, {
        credentials: { ...credentials, secretAccessKey: 'another' },
        region: 'us-east-1',
        service: 'execute-api',
      }),
    ).toMatch(/^signature/);
    // no kick in this deployment: the event waits in the outbox
    const { rows } = await f.db.db.query(
      'SELECT x.published_at FROM orders o JOIN outbox x ON x.id = o.created_event_id WHERE o.id = $1',
      [order.orderId],
    );
    expect(rows).toEqual([{ published_at: null }]);
  });

  it('relay drain --stack: the relay invoked synchronously with the drain event publishes the order event', async () => {
    f.deployment.calls.reset();
    const out = await cli(['relay', 'drain', '--stack', stackName, '--json']);
    expect(out.code, out.stderr).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({
      mode: 'drain',
      outbox: { published: 1, failed: 0 },
      inventory_outbox: { published: 0 },
    });
    expect(f.deployment.calls.counts()['lambda:Invoke']).toBe(1);
    const { rows } = await f.db.db.query(
      'SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL',
    );
    expect(rows).toEqual([{ n: 0 }]);
  });

  it('reserve on its event source, relay drain (the table form) for the result, order-results on its own: the order is reserved', async () => {
    sources.push(await startSqsEventSource(f.deployment, 'reserve-inventory-sqs'));
    await waitFor(
      async () =>
        (
          await f.inventoryDb.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM inventory_outbox WHERE published_at IS NULL',
          )
        ).rows[0]?.n === 1,
      { timeoutMs: 60_000, message: "inventory's result event in its outbox" },
    );
    const out = await cli(['relay', 'drain', '--stack', stackName]);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toMatch(/relay outbox-relay: drain/);
    expect(out.stdout).toMatch(/inventory_outbox\W+│\s+1\s+│/);
    sources.push(await startSqsEventSource(f.deployment, 'order-results-sqs'));
    await waitFor(
      async () =>
        (
          await f.db.db.query('SELECT reservation_status FROM orders WHERE id = $1', [
            order.orderId,
          ])
        ).rows[0]?.reservation_status === 'reserved',
      { timeoutMs: 60_000, message: 'the order reserved' },
    );
  });

  it('orders show --stack: GET /orders/{id}, signed, reads reserved', async () => {
    const out = await cli(['orders', 'show', order.orderId, '--stack', stackName]);
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toMatch(/^200 OK\n/);
    expect(JSON.parse(out.stdout.slice(out.stdout.indexOf('\n') + 1))).toMatchObject({
      orderId: order.orderId,
      reservation: { status: 'reserved' },
    });
    const request = lastApiRequest();
    expect(request).toMatchObject({ method: 'GET', url: `/orders/${order.orderId}` });
    expect(
      await sigV4Problem(request, { credentials, region: 'us-east-1', service: 'execute-api' }),
    ).toBeUndefined();
  });

  it('outbox status --stack lists a row needing attention (exit 1); outbox retry --stack puts it back', async () => {
    const placed = await new OrderService({ db: f.db.db }).place({
      sku: 'SKU-1',
      quantity: 1,
      correlationId: 'cli-attention',
    });
    await f.db.db.query(
      `UPDATE outbox SET attempts = 10, needs_attention_at = now(), last_error = 'broker refused it'
        WHERE id = $1`,
      [placed.eventId],
    );
    const status = await cli(['outbox', 'status', '--json', '--stack', stackName]);
    expect(status.code).toBe(1);
    const [outbox] = JSON.parse(status.stdout) as {
      table: string;
      needsAttention: number;
      rows: { id: string; reason: string }[];
    }[];
    expect(outbox).toMatchObject({
      table: 'outbox',
      needsAttention: 1,
      rows: [{ id: placed.eventId, reason: 'broker refused it' }],
    });
    const retry = await cli(['outbox', 'retry', '--table', 'outbox', '--stack', stackName]);
    expect(retry).toMatchObject({ code: 0, stdout: 'outbox: 1 row(s) back in the batches\n' });
    const { rows } = await f.db.db.query(
      'SELECT needs_attention_at, published_at FROM outbox WHERE id = $1',
      [placed.eventId],
    );
    expect(rows).toEqual([{ needs_attention_at: null, published_at: null }]);
  });

  it('maintenance run --stack deletes inbox rows past their retention, through the Data API', async () => {
    await f.db.db.query(
      `INSERT INTO processed_messages (consumer_name, message_id, processed_at)
       VALUES ('old-consumer', gen_random_uuid(), now() - interval '60 days')`,
    );
    const out = await cli(['maintenance', 'run', '--json', '--stack', stackName]);
    expect(out.code, out.stderr).toBe(0);
    // each service's database (the old row is in the order service's)
    expect(JSON.parse(out.stdout)).toMatchObject({
      orders: { dryRun: false, tables: { processed_messages: { deleted: 1 } } },
      inventory: { dryRun: false, tables: { processed_messages: { deleted: 0 } } },
    });
  });

  it("parked list, notify and redrive --transport sqs --stack: the stack's pinned queues in its region", async () => {
    const orderId = randomUUID();
    const e = newEnvelope({
      type: 'order.created',
      aggregate: { type: 'order', id: orderId, version: 1 },
      data: { orderId, sku: 'SKU-1', quantity: 1 },
      correlationId: 'cli-parked',
      producer: 'order-service',
    });
    // as SQS's redrive policy moves a message there: body and identity attributes
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: f.deployment.queue('inventory-orders-parking').url,
        MessageBody: encodeEnvelope(e).toString('utf8'),
        MessageAttributes: envelopeAttributes(e),
      }),
    );
    const list = await cli([
      'parked',
      'list',
      '--transport',
      'sqs',
      '--json',
      '--stack',
      stackName,
    ]);
    expect(list.code, list.stderr).toBe(0);
    expect(JSON.parse(list.stdout)).toMatchObject([
      { via: 'broker', messageId: e.id, type: 'order.created', errorClass: 'sqs:maxReceiveCount' },
    ]);
    // the backstop for what the broker parked by itself: the order side is told, nothing consumed
    const notify = await cli(['parked', 'notify', '--transport', 'sqs', '--stack', stackName]);
    expect(notify.code, notify.stderr).toBe(0);
    expect(notify.stdout).toContain(`notified order ${orderId} (v1)`);
    expect(notify.stdout).toContain('1 order(s) to tell, 0 not published');
    const dir = await mkdtemp(join(tmpdir(), 'cli-redrive-'));
    const redrive = await cli([
      'parked',
      'redrive',
      '--transport',
      'sqs',
      '--ids',
      e.id,
      '--out',
      join(dir, 'moved.json'),
      '--stack',
      stackName,
    ]);
    expect(redrive.code, redrive.stderr).toBe(0);
    expect(redrive.stdout).toContain('matched 1, moved 1');
    expect(JSON.parse(await readFile(join(dir, 'moved.json'), 'utf8')).moved).toEqual([e.id]);
    await rm(dir, { recursive: true, force: true });
    // back on the source queue, reserve (still on its event source) takes it
    await f.journal.waitForLine(e.id, 'acked', 1, 60_000);
  });

  it('parked --transport rabbitmq --stack: says the broker is reached from inside the VPC, at AMQP_URL', async () => {
    const out = await cli(['parked', 'list', '--transport', 'rabbitmq', '--stack', stackName], {
      ...aws,
      AMQP_URL: 'amqp://guest:guest@127.0.0.1:1',
    });
    expect(out.code).toBe(2);
    expect(out.stderr).toContain(
      `--stack ${stackName}: the Amazon MQ broker is private and admits only the stack's operator security group, so the parking lot is reached at AMQP_URL and RABBITMQ_MANAGEMENT_URL from inside the stack's VPC`,
    );
  });

  it('without --stack, orders place --url reaches a local API unsigned', async () => {
    const out = await cli(
      ['orders', 'place', '--sku', 'SKU-1', '--quantity', '1', '--url', proxy.url],
      {},
    );
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toMatch(/^201 Created\n/);
    expect(lastApiRequest().headers.authorization).toBeUndefined();
  });
});
