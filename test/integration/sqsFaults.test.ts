import { randomUUID } from 'node:crypto';
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type SQSClient,
  type SQSServiceException,
} from '@aws-sdk/client-sqs';
import { isThrottlingError, isTransientError } from '@smithy/core/retry';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  FAILED_ENTRY_CODE,
  type SqsFaultLayer,
  type SqsThrottleError,
  startSqsFaultLayer,
} from '../../devkit/emulators/sqsFaults.js';
import { waitFor } from '../../devkit/waitFor.js';
import { createSqsClient } from '../../shared/transport/sqs/index.js';
import { uniqueName } from '../helpers/services.js';
import { SQS_SERVERS } from '../helpers/sqs.js';

/** The embedded fauxqs server of this run (or the one external endpoint `SQS_ENDPOINT` names). */
const server = SQS_SERVERS.find((s) => s.name === 'fauxqs') ?? SQS_SERVERS[0];

const bodyOf = (id: string) => JSON.stringify({ id, type: 'test.event' });
const idOf = (m: Message) => (JSON.parse(m.Body ?? '{}') as { id?: string }).id;

/** What a client sees when a call fails (an SQS service exception, or a connection error). */
async function failureOf(call: Promise<unknown>): Promise<SQSServiceException> {
  try {
    await call;
  } catch (err) {
    return err as SQSServiceException;
  }
  throw new Error('the call succeeded');
}

describe('SQS fault layer (devkit/emulators/sqsFaults.ts)', () => {
  let layer: SqsFaultLayer;
  /** Through the layer: what our code would see. */
  let client: SQSClient;
  /** Straight to the server: what the queue really holds. */
  let direct: SQSClient;
  const queueUrls: string[] = [];

  beforeEach(async () => {
    if (!server) throw new Error('no SQS server in this run');
    layer = await startSqsFaultLayer(server.endpoint);
    client = createSqsClient({
      endpoint: layer.endpoint,
      maxAttempts: 1,
      requestTimeoutMs: 10_000,
    });
    direct = createSqsClient({ endpoint: server.endpoint, maxAttempts: 1 });
  });

  afterEach(async () => {
    for (const url of queueUrls.splice(0)) {
      await direct.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => {});
    }
    await layer.close();
    client.destroy();
    direct.destroy();
  });

  const createQueue = async (label: string, fifo = false): Promise<string> => {
    const name = `${uniqueName(label)}${fifo ? '.fifo' : ''}`;
    const out = await direct.send(
      new CreateQueueCommand({
        QueueName: name,
        Attributes: fifo ? { FifoQueue: 'true', ContentBasedDeduplication: 'true' } : {},
      }),
    );
    const url = out.QueueUrl as string;
    queueUrls.push(url);
    return url;
  };

  const sendDirect = async (url: string, ids: string[]) => {
    for (const id of ids) {
      await direct.send(new SendMessageCommand({ QueueUrl: url, MessageBody: bodyOf(id) }));
    }
  };

  const receive = async (url: string, options: { max?: number; visibility?: number } = {}) =>
    (
      await client.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: options.max ?? 10,
          VisibilityTimeout: options.visibility ?? 30,
          WaitTimeSeconds: 0,
          MessageSystemAttributeNames: ['All'],
        }),
      )
    ).Messages ?? [];

  /** Messages the queue holds, visible or in flight (read straight from the server). */
  const held = async (url: string): Promise<number> => {
    const out = await direct.send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    const a = out.Attributes ?? {};
    return (
      Number(a.ApproximateNumberOfMessages ?? 0) +
      Number(a.ApproximateNumberOfMessagesNotVisible ?? 0)
    );
  };

  it('passes everything through unchanged while nothing is armed', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_pass');

    // Act
    await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: bodyOf('e-1') }));
    const [m] = await receive(url);
    await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m?.ReceiptHandle }));

    // Assess
    expect(m && idOf(m)).toBe('e-1');
    expect(await held(url)).toBe(0);
    expect(layer.events).toEqual([]);
  });

  it('duplicate: the next receive delivers a second copy with its own receipt handle, and either copy settles', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_dup');
    await sendDirect(url, ['e-dup']);
    layer.arm({ kind: 'duplicate' });

    // Act
    const first = await receive(url);
    const second = await receive(url);

    // Assess: one message, two deliveries, two handles, the receive count one higher
    expect(first).toHaveLength(1);
    expect(second).toHaveLength(1);
    const [a, b] = [first[0] as Message, second[0] as Message];
    expect(b.MessageId).toBe(a.MessageId);
    expect(b.Body).toBe(a.Body);
    expect(b.ReceiptHandle).not.toBe(a.ReceiptHandle);
    expect(a.Attributes?.ApproximateReceiveCount).toBe('1');
    expect(b.Attributes?.ApproximateReceiveCount).toBe('2');
    // both handles work: the copy's is forwarded as the original's
    await client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: url,
        ReceiptHandle: b.ReceiptHandle,
        VisibilityTimeout: 60,
      }),
    );
    const batch = await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: [{ Id: 'copy', ReceiptHandle: b.ReceiptHandle }],
      }),
    );
    expect(batch.Successful?.map((s) => s.Id)).toEqual(['copy']);
    expect(batch.Failed ?? []).toEqual([]);
    await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: a.ReceiptHandle }));
    expect(await held(url)).toBe(0);
    // it acted once, then disarmed itself
    expect(await receive(url)).toEqual([]);
    expect(layer.count('duplicate')).toBe(1);
    expect(layer.events[0]).toMatchObject({
      kind: 'duplicate',
      messageIds: [a.MessageId],
      eventIds: ['e-dup'],
    });
  });

  it('reorder: an answer of several comes reversed; a single message is held and comes after the next answer', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_reorder');
    await sendDirect(url, ['e-1', 'e-2', 'e-3']);
    layer.arm({ kind: 'reorder', count: 2 });

    // Act: reversed
    const reversed = await receive(url);
    await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: reversed.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
      }),
    );
    // Act: across receives
    await sendDirect(url, ['e-4']);
    const withHeld = await receive(url);
    await sendDirect(url, ['e-5']);
    const next = await receive(url);

    // Assess
    expect(reversed.map(idOf)).toEqual(['e-3', 'e-2', 'e-1']);
    expect(withHeld).toEqual([]);
    expect(next.map(idOf)).toEqual(['e-5', 'e-4']);
    expect(layer.count('reorder')).toBe(2);
    expect(layer.events.map((e) => e.eventIds)).toEqual([['e-3', 'e-2', 'e-1'], ['e-4']]);
  });

  it('reorder: a held message comes back alone on the first receive after holdMs', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_hold');
    await sendDirect(url, ['e-held']);
    layer.arm({ kind: 'reorder', holdMs: 300 });

    // Act
    expect(await receive(url)).toEqual([]);
    const heldAt = layer.events[0]?.at ?? 0;
    // not before its holdMs, the queue being empty meanwhile
    expect(await receive(url)).toEqual([]);
    const back = await waitFor(async () => {
      const got = await receive(url);
      return got.length > 0 ? { got, at: Date.now() } : undefined;
    });

    // Assess
    expect(back.got.map(idOf)).toEqual(['e-held']);
    expect(back.at - heldAt).toBeGreaterThanOrEqual(300);
    expect(layer.count('reorder')).toBe(1);
  });

  it('never duplicates or reorders a FIFO queue', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_fifo', true);
    const sent = ['f-1', 'f-2', 'f-3'];
    for (const [i, id] of sent.entries()) {
      await direct.send(
        new SendMessageCommand({ QueueUrl: url, MessageBody: bodyOf(id), MessageGroupId: `g${i}` }),
      );
    }
    layer.arm({ kind: 'duplicate' });
    layer.arm({ kind: 'reorder' });

    // Act
    const first = await receive(url);
    const second = await receive(url);

    // Assess: nothing held back or reversed, no copy of a message in flight
    expect(first.length).toBeGreaterThan(0);
    expect(first.map(idOf)).toEqual(sent.filter((id) => first.some((m) => idOf(m) === id)));
    const inFlight = new Set(first.map((m) => m.MessageId));
    expect(second.filter((m) => inFlight.has(m.MessageId))).toEqual([]);
    expect(layer.events).toEqual([]);
  });

  it('partial-batch: entries at odd positions are reported Failed and not enqueued; the others are sent', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_partial');
    layer.arm({ kind: 'partial-batch' });
    const ids = ['b-0', 'b-1', 'b-2', 'b-3'];

    // Act
    const out = await client.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: ids.map((id, i) => ({ Id: String(i), MessageBody: bodyOf(id) })),
      }),
    );

    // Assess: HTTP 200 with a mixed result
    expect(out.$metadata.httpStatusCode).toBe(200);
    expect(out.Successful?.map((s) => s.Id).sort()).toEqual(['0', '2']);
    expect(out.Failed?.map((f) => f.Id).sort()).toEqual(['1', '3']);
    for (const f of out.Failed ?? []) {
      expect(f).toMatchObject({ SenderFault: false, Code: FAILED_ENTRY_CODE });
    }
    // exactly the Successful ones are in the queue
    expect(await held(url)).toBe(2);
    const got = await receive(url);
    expect(got.map(idOf).sort()).toEqual(['b-0', 'b-2']);
    expect(got.map((m) => m.MessageId).sort()).toEqual(
      (out.Successful ?? []).map((s) => s.MessageId).sort(),
    );
    expect(layer.events).toMatchObject([
      { kind: 'partial-batch', messageIds: [], eventIds: ['b-1', 'b-3'] },
    ]);
    // disarmed after one batch
    const again = await client.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: [
          { Id: 'a', MessageBody: bodyOf('b-4') },
          { Id: 'b', MessageBody: bodyOf('b-5') },
        ],
      }),
    );
    expect(again.Failed ?? []).toEqual([]);
  });

  it.each([
    { error: 'ThrottlingException', name: 'ThrottlingException', status: 400, throttling: true },
    { error: 'RequestThrottled', name: 'RequestThrottled', status: 403, throttling: true },
    { error: 'http-500', name: 'InternalError', status: 500, throttling: false },
    { error: 'http-503', name: 'ServiceUnavailable', status: 503, throttling: false },
  ] as { error: SqsThrottleError; name: string; status: number; throttling: boolean }[])(
    'throttle ($error): matching calls fail as SQS answers them, others pass, and it ends after forMs',
    async ({ error, name, status, throttling }) => {
      // Prepare
      const url = await createQueue('sqsfaults_throttle');
      const forMs = 400;
      layer.arm({ kind: 'throttle', forMs, error, operations: ['SendMessage'] });
      const armedAt = Date.now();

      // Act
      const err = await failureOf(
        client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: bodyOf('t-1') })),
      );
      const receivedMeanwhile = await receive(url);

      // Assess: the error the SDK raises, and how its retry strategy classes it
      expect(err.name).toBe(name);
      expect(err.$metadata.httpStatusCode).toBe(status);
      expect(err.$fault).toBe(status >= 500 ? 'server' : 'client');
      const classified = err as unknown as Parameters<typeof isThrottlingError>[0];
      expect(isThrottlingError(classified)).toBe(throttling);
      if (!throttling) expect(isTransientError(classified)).toBe(true);
      expect(receivedMeanwhile).toEqual([]);
      expect(await held(url)).toBe(0);
      // after forMs the same call goes through
      const sent = await waitFor(
        () =>
          client
            .send(new SendMessageCommand({ QueueUrl: url, MessageBody: bodyOf('t-2') }))
            .catch(() => undefined),
        { intervalMs: 50 },
      );
      expect(Date.now() - armedAt).toBeGreaterThanOrEqual(forMs);
      expect(sent.MessageId).toBeTruthy();
      expect(await held(url)).toBe(1);
      expect(layer.count('throttle')).toBeGreaterThanOrEqual(1);
      expect(layer.events.every((e) => e.kind === 'throttle')).toBe(true);
    },
  );

  it('throttle: the SDK retries a throttled call by itself (standard retry mode)', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_retry');
    const retrying = createSqsClient({ endpoint: layer.endpoint, maxAttempts: 10 });
    layer.arm({ kind: 'throttle', forMs: 150, operations: ['SendMessage'] });

    // Act
    const out = await retrying.send(
      new SendMessageCommand({ QueueUrl: url, MessageBody: bodyOf('r-1') }),
    );
    retrying.destroy();

    // Assess
    expect(out.$metadata.attempts).toBeGreaterThan(1);
    expect(layer.count('throttle')).toBe((out.$metadata.attempts ?? 0) - 1);
    expect(await held(url)).toBe(1);
  });

  it('lose-delete-response: the delete takes effect, the client gets a 500', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_lose');
    await sendDirect(url, ['d-1', 'd-2', 'd-3']);
    const got = await receive(url);
    layer.arm({ kind: 'lose-delete-response', count: 2 });

    // Act
    const single = await failureOf(
      client.send(
        new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: got[0]?.ReceiptHandle }),
      ),
    );
    const batch = await failureOf(
      client.send(
        new DeleteMessageBatchCommand({
          QueueUrl: url,
          Entries: got.slice(1).map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
        }),
      ),
    );

    // Assess
    for (const err of [single, batch]) {
      expect(err.name).toBe('InternalError');
      expect(err.$metadata.httpStatusCode).toBe(500);
    }
    expect(await held(url)).toBe(0);
    expect(layer.count('lose-delete-response')).toBe(2);
    expect(layer.events.map((e) => e.eventIds)).toEqual([
      [idOf(got[0] as Message)],
      got.slice(1).map(idOf),
    ]);
  });

  it('stale-receipt: the delete answers success but the message stays and is received again', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_stale');
    await sendDirect(url, ['s-1', 's-2']);
    const got = await receive(url, { visibility: 1 });
    layer.arm({ kind: 'stale-receipt', count: 2 });

    // Act
    await client.send(
      new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: got[0]?.ReceiptHandle }),
    );
    const batch = await client.send(
      new DeleteMessageBatchCommand({
        QueueUrl: url,
        Entries: [{ Id: 'x', ReceiptHandle: got[1]?.ReceiptHandle }],
      }),
    );

    // Assess: both answered success, and both come back after the visibility timeout
    expect(batch.Successful?.map((s) => s.Id)).toEqual(['x']);
    expect(batch.Failed ?? []).toEqual([]);
    expect(await held(url)).toBe(2);
    const again: Message[] = [];
    await waitFor(async () => {
      again.push(...(await receive(url)));
      return again.length >= 2;
    });
    expect(again.map((m) => m.MessageId).sort()).toEqual(got.map((m) => m.MessageId).sort());
    expect(layer.count('stale-receipt')).toBe(2);
    expect(layer.events[0]).toMatchObject({
      messageIds: [got[0]?.MessageId],
      eventIds: [idOf(got[0] as Message)],
    });
  });

  it('hold-send: the message is enqueued while the answer is held; released, the sender gets it', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_release');
    layer.arm({ kind: 'hold-send' });

    // Act
    let settled = false;
    const sending = client
      .send(new SendMessageCommand({ QueueUrl: url, MessageBody: bodyOf('h-1') }))
      .finally(() => {
        settled = true;
      });
    await waitFor(async () => (await held(url)) === 1);
    const answeredBeforeRelease = settled;
    await layer.releaseHeld();
    const out = await sending;

    // Assess
    expect(answeredBeforeRelease).toBe(false);
    expect(out.MessageId).toBeTruthy();
    expect(layer.events).toMatchObject([
      { kind: 'hold-send', messageIds: [out.MessageId], eventIds: ['h-1'] },
    ]);
  });

  it('hold-send: dropped, the sender gets a broken connection though its messages were enqueued', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_drop');
    layer.arm({ kind: 'hold-send' });

    // Act
    const sending = failureOf(
      client.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: [
            { Id: '0', MessageBody: bodyOf('h-2') },
            { Id: '1', MessageBody: bodyOf('h-3') },
          ],
        }),
      ),
    );
    await waitFor(async () => (await held(url)) === 2);
    layer.dropHeld();
    const err = await sending;

    // Assess
    expect(err.$metadata?.httpStatusCode).toBeUndefined();
    expect(err.name).not.toMatch(/Throttl/);
    expect(layer.count('hold-send')).toBe(1);
    expect(layer.events[0]?.eventIds).toEqual(['h-2', 'h-3']);
    expect(layer.events[0]?.messageIds).toHaveLength(2);
    expect(await receive(url).then((m) => m.map(idOf).sort())).toEqual(['h-2', 'h-3']);
  });

  it('arming checks its options, and disarm() stops a behaviour before it acts', async () => {
    // Prepare
    const url = await createQueue('sqsfaults_disarm');
    await sendDirect(url, [randomUUID()]);

    // Act
    expect(() => layer.arm({ kind: 'duplicate', count: 0 })).toThrow(RangeError);
    expect(() => layer.arm({ kind: 'throttle', forMs: 0 })).toThrow(RangeError);
    layer.arm({ kind: 'stale-receipt' });
    layer.arm({ kind: 'duplicate' });
    layer.disarm('stale-receipt');
    const [m] = await receive(url);
    layer.disarm();
    await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m?.ReceiptHandle }));

    // Assess: the delete went through, and the remembered copy was never delivered
    expect(await held(url)).toBe(0);
    expect(await receive(url)).toEqual([]);
    expect(layer.events).toEqual([]);
  });
});
