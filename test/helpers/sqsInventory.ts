import type { SQSClient } from '@aws-sdk/client-sqs';
import type { RawMessage } from '../../devkit/rawMessages.js';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { Envelope, RunningConsumer, SqlDatabase } from '../../shared/index.js';
import { DEFAULT_RETENTION, type RetryBudget } from '../../shared/index.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import type { SqsBackendConfig } from '../../shared/transport/sqs/config.js';
import type { SqsRetryMode } from '../../shared/transport/sqs/constants.js';
import type { SqsBackend } from '../../shared/transport/sqs/index.js';
import type { SqsPipelineQueues } from '../../shared/transport/sqs/SqsBackend.js';
import type { SqsServer } from '../globalSetup.js';
import { ConsumerRig, RIG_CONSUMER, type RigConsumerOptions } from './inventory.js';
import { SERVICES } from './services.js';

/**
 * The SQS twin of InventoryRig: its own database and its own queues (by prefix) on a shared
 * server, prepared by the backend (source with its RedrivePolicy, parking, results; a 6 s
 * visibility timeout, so a lost delivery comes back quickly).
 */
export class SqsInventoryRig extends ConsumerRig<SqsBackend> {
  private constructor(
    scratch: ScratchEnvironment,
    backend: SqsBackend,
    budget: RetryBudget,
    readonly queues: SqsPipelineQueues,
    readonly server: SqsServer,
  ) {
    super(scratch, backend, budget);
  }

  static async create(
    server: SqsServer,
    label: string,
    options: {
      mode?: SqsRetryMode;
      fifo?: boolean;
      budget?: RetryBudget;
      /** The source queue's visibility timeout (default 6 s). */
      visibilityTimeoutSeconds?: number;
      /** Called when parking refused a copy (the deployed functions' `ParkRefused` metric). */
      onParkRefused?: SqsBackendConfig['onParkRefused'];
    } = {},
  ): Promise<SqsInventoryRig> {
    const budget = options.budget ?? TEST_RETRY_BUDGET;
    const scratch = await createScratch({ ...SERVICES, sqsEndpoint: server.endpoint }, label, {
      transports: ['sqs'],
    });
    try {
      const backend = scratch.backend(
        'sqs',
        {
          budget,
          retention: DEFAULT_RETENTION,
          consumer: RIG_CONSUMER,
          topology: PIPELINE_TOPOLOGY,
        },
        {
          mode: options.mode ?? 'visibility',
          fifo: options.fifo ?? false,
          visibilityTimeoutSeconds: options.visibilityTimeoutSeconds ?? 6,
          requestTimeoutMs: 2_000,
          maxAttempts: 1,
          ...(options.onParkRefused ? { onParkRefused: options.onParkRefused } : {}),
        },
      );
      await backend.prepare();
      return new SqsInventoryRig(scratch, backend, budget, await backend.queues(), server);
    } catch (err) {
      await scratch.close();
      throw err;
    }
  }

  get mode(): SqsRetryMode {
    return this.backend.config.mode;
  }

  get retryComesBackAs(): 'copy' | 'redelivery' {
    return this.mode === 'visibility' ? 'redelivery' : 'copy';
  }

  start(options: RigConsumerOptions = {}): Promise<RunningConsumer> {
    return this.trigger(options);
  }

  cliEnv(): Record<string, string> {
    return { SQS_ENDPOINT: this.endpoint, SQS_QUEUE_PREFIX: this.prefix };
  }

  override devEnv(): Record<string, string> {
    return {
      ...super.devEnv(),
      SQS_VISIBILITY_TIMEOUT_S: String(this.backend.config.visibilityTimeoutSeconds ?? 6),
      FUNCTION_TIMEOUT_MS: '1000',
      // one poller: each long poll a killed process leaves open on the server may still take the
      // message when it is visible again (as on SQS), and the deployed mapping runs 5
      SQS_MAX_CONCURRENCY: '1',
    };
  }

  get client(): SQSClient {
    return this.backend.client;
  }

  get endpoint(): string {
    return this.server.endpoint;
  }

  /** The queue-name prefix (`SQS_QUEUE_PREFIX` for a child process on the same queues). */
  get prefix(): string {
    return this.scratch.sqsPrefix;
  }

  /** Starts the reserve function behind the SQS trigger emulation (stopped at close). */
  trigger(
    options: {
      db?: SqlDatabase;
      batchSize?: number;
      batchWindowMs?: number;
      concurrency?: number;
      functionTimeoutMs?: number;
    } = {},
  ): Promise<RunningConsumer> {
    const { db, ...settings } = options;
    return this.consumer(db, {
      mode: 'lambda',
      batchSize: 10,
      concurrency: 2,
      functionTimeoutMs: 1_000,
      ...settings,
    });
  }

  /** Sends as the relay does: body = envelope, identity in attributes. */
  send(...envelopes: Envelope[]): Promise<void> {
    return this.publish(...envelopes);
  }

  /** Sends messages as they are (poison messages, missing ids). */
  sendRaw(messages: RawMessage[]): Promise<void> {
    return this.publishRaw(messages);
  }
}
