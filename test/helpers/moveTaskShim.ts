import { randomUUID } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  type MessageAttributeValue,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';

interface Task {
  handle: string;
  sourceArn: string;
  status: 'RUNNING' | 'COMPLETED' | 'FAILED';
  moved: number;
  toMove: number;
  failureReason?: string;
  startedAt: number;
}

/**
 * An SQS endpoint in front of an emulator that adds the message move task API neither fauxqs nor
 * moto has (`StartMessageMoveTask`, `ListMessageMoveTasks`, JSON protocol), as AWS documents
 * it: the task moves the source queue's messages as they are (body and attributes) one by one at
 * `perMessageMs`, reports them moved and to move, and names its handle only while it runs. Every
 * other call is passed to the emulator unchanged. `failNext` makes the next task fail with that
 * reason after moving what it moved. A test fake for an AWS API we cannot run, not a model of it.
 */
export class MoveTaskShim {
  private server: Server | undefined;
  private readonly client: SQSClient;
  readonly tasks: Task[] = [];
  endpoint = '';
  failNext: string | undefined;

  constructor(
    private readonly upstream: string,
    private readonly queues: { sourceArn: string; sourceUrl: string; destinationUrl: string },
    private readonly perMessageMs = 300,
  ) {
    this.client = new SQSClient({
      endpoint: upstream,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
  }

  async start(): Promise<this> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const target = String(req.headers['x-amz-target'] ?? '');
        const reply = (status: number, json: unknown) => {
          res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
          res.end(JSON.stringify(json));
        };
        if (target === 'AmazonSQS.StartMessageMoveTask') {
          const input = JSON.parse(body.toString('utf8')) as { SourceArn: string };
          if (input.SourceArn !== this.queues.sourceArn) {
            reply(400, { __type: 'ResourceNotFoundException', message: 'unknown source' });
            return;
          }
          void this.startTask(input.SourceArn).then((handle) => reply(200, { TaskHandle: handle }));
          return;
        }
        if (target === 'AmazonSQS.ListMessageMoveTasks') {
          const input = JSON.parse(body.toString('utf8')) as { SourceArn: string };
          const results = this.tasks
            .filter((t) => t.sourceArn === input.SourceArn)
            .reverse()
            .slice(0, 10)
            .map((t) => ({
              ...(t.status === 'RUNNING' ? { TaskHandle: t.handle } : {}),
              Status: t.status,
              SourceArn: t.sourceArn,
              ApproximateNumberOfMessagesMoved: t.moved,
              ApproximateNumberOfMessagesToMove: t.toMove,
              ...(t.failureReason ? { FailureReason: t.failureReason } : {}),
              StartedTimestamp: t.startedAt,
            }));
          reply(200, { Results: results });
          return;
        }
        const up = request(
          new URL(req.url ?? '/', this.upstream),
          { method: req.method, headers: req.headers },
          (upRes) => {
            res.writeHead(upRes.statusCode ?? 500, upRes.headers);
            upRes.pipe(res);
          },
        );
        up.on('error', (err) => reply(502, { __type: 'ShimError', message: err.message }));
        up.end(body);
      });
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this;
  }

  private async startTask(sourceArn: string): Promise<string> {
    const depth = await this.client.send(
      new GetQueueAttributesCommand({
        QueueUrl: this.queues.sourceUrl,
        AttributeNames: ['ApproximateNumberOfMessages'],
      }),
    );
    const task: Task = {
      handle: randomUUID(),
      sourceArn,
      status: 'RUNNING',
      moved: 0,
      toMove: Number(depth.Attributes?.ApproximateNumberOfMessages ?? 0),
      startedAt: Date.now(),
    };
    this.tasks.push(task);
    const failure = this.failNext;
    this.failNext = undefined;
    void this.run(task, failure);
    return task.handle;
  }

  private async run(task: Task, failure: string | undefined): Promise<void> {
    for (;;) {
      await new Promise((r) => setTimeout(r, this.perMessageMs));
      if (failure) {
        task.status = 'FAILED';
        task.failureReason = failure;
        return;
      }
      const { Messages = [] } = await this.client.send(
        new ReceiveMessageCommand({
          QueueUrl: this.queues.sourceUrl,
          MaxNumberOfMessages: 1,
          MessageAttributeNames: ['All'],
          WaitTimeSeconds: 0,
        }),
      );
      const m = Messages[0];
      if (!m) {
        task.status = 'COMPLETED';
        return;
      }
      const attributes: Record<string, MessageAttributeValue> = {};
      for (const [name, v] of Object.entries(m.MessageAttributes ?? {})) {
        attributes[name] = { DataType: v.DataType, StringValue: v.StringValue };
      }
      await this.client.send(
        new SendMessageCommand({
          QueueUrl: this.queues.destinationUrl,
          MessageBody: m.Body ?? '',
          MessageAttributes: attributes,
        }),
      );
      await this.client.send(
        new DeleteMessageCommand({
          QueueUrl: this.queues.sourceUrl,
          ReceiptHandle: m.ReceiptHandle,
        }),
      );
      task.moved++;
    }
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) =>
      this.server ? this.server.close(() => resolve()) : resolve(),
    );
    this.client.destroy();
  }
}
