import type { SNSClient } from '@aws-sdk/client-sns';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { z } from 'zod';
import type { Retention, RetryBudget } from '../../config/budget.js';
import type { Env } from '../../config/env.js';
import type { ParkRefused } from '../../consumer/driver.js';
import type { Logger } from '../../logger.js';
import type { Stream, Topology } from '../../port/types.js';
import { backendBaseSchema, url } from '../module.js';
import type { SqsRetryMode } from './constants.js';

/** Where the queues are and how this backend uses them. */
export interface SqsBackendConfig {
  /** An SQS-compatible endpoint (fauxqs, moto); unset = AWS. */
  endpoint?: string | undefined;
  region: string;
  /** Queue name prefix (tests and labs sharing one server). */
  prefix?: string;
  /** The FIFO variant of the inventory queues (MessageGroupId = aggregate id). */
  fifo?: boolean;
  /** How "retry later" is done. */
  mode: SqsRetryMode;
  budget: RetryBudget;
  retention: Retention;
  /** The source queue's visibility timeout (s), set by `prepare`. */
  visibilityTimeoutSeconds?: number;
  /** Who parks, for diagnoses (`inventory@<version>`). */
  consumer: string;
  /** The streams and subscriptions, by name (`Topology`). */
  topology: Topology;
  /**
   * The queue URLs of a deployed pipeline (no `prepare`). Unset: `prepare` creates the queues,
   * or they are looked up by name.
   */
  queueUrls?: { source: string; parking?: string; results?: string };
  /**
   * Streams published through an SNS topic, for fan-out (docs/design.md, "Fan-out on SQS"): each
   * subscription on such a stream is a queue subscribed to the stream's topic with raw message
   * delivery, so every subscriber, another service's queue too, gets every event. The other
   * streams go straight to the queue of the one subscription that reads them.
   */
  fanOut?: readonly Stream[];
  /** The topics of a deployed pipeline's fan-out streams, by stream (no lookup; implies `fanOut`). */
  topicArns?: Readonly<Record<Stream, string>>;
  /** A client to use instead of one built from `endpoint` (closed by its owner). */
  client?: SQSClient;
  /** The SNS client for fan-out streams (default: one with the SQS client's settings). */
  snsClient?: SNSClient;
  requestTimeoutMs?: number;
  maxAttempts?: number;
  /** Called when the parking queue refused a consumer's copy (deployed: the `ParkRefused` metric). */
  onParkRefused?: (refused: ParkRefused) => void;
  logger?: Logger;
}

/**
 * The SQS backend's configuration from the runtime environment: a deployed pipeline's queue
 * URLs when `SOURCE_QUEUE_URL` is set (FIFO when it ends in `.fifo`) and its fan-out topics
 * (`STREAM_TOPIC_ARNS`), else the topology's names with `SQS_QUEUE_PREFIX` on `SQS_ENDPOINT`
 * (unset: AWS).
 */
export function sqsConfigFromEnv(
  env: Env,
  base: Pick<SqsBackendConfig, 'budget' | 'retention' | 'consumer' | 'topology'> &
    Partial<SqsBackendConfig>,
): SqsBackendConfig {
  const source = env.SOURCE_QUEUE_URL;
  return {
    endpoint: env.SQS_ENDPOINT,
    region: env.AWS_REGION,
    prefix: env.SQS_QUEUE_PREFIX,
    mode: env.SQS_RETRY_MODE,
    visibilityTimeoutSeconds: env.SQS_VISIBILITY_TIMEOUT_S,
    ...(source
      ? {
          fifo: source.endsWith('.fifo'),
          queueUrls: {
            source,
            ...(env.PARKING_QUEUE_URL ? { parking: env.PARKING_QUEUE_URL } : {}),
            ...(env.RESULTS_QUEUE_URL ? { results: env.RESULTS_QUEUE_URL } : {}),
          },
        }
      : {}),
    ...(env.STREAM_TOPIC_ARNS ? { topicArns: env.STREAM_TOPIC_ARNS } : {}),
    ...base,
  };
}

const positive = z.number().int().positive();

/** What `SqsBackendConfig` must hold, checked before the backend is built. */
export const sqsConfigSchema = backendBaseSchema.extend({
  endpoint: url().optional(),
  region: z.string().min(1),
  prefix: z.string().optional(),
  fifo: z.boolean().optional(),
  mode: z.enum(['visibility', 'resend']),
  visibilityTimeoutSeconds: z.number().int().min(0).max(43_200).optional(),
  // not checked as URLs: emulators answer hosts a URL parser refuses (`sqs.us-east-1.127.0.0.1`)
  queueUrls: z
    .object({
      source: z.string().min(1),
      parking: z.string().optional(),
      results: z.string().optional(),
    })
    .optional(),
  fanOut: z.array(z.string().min(1)).optional(),
  topicArns: z.record(z.string(), z.string().min(1)).optional(),
  client: z.custom<SQSClient>((v) => typeof v === 'object' && v !== null).optional(),
  snsClient: z.custom<SNSClient>((v) => typeof v === 'object' && v !== null).optional(),
  requestTimeoutMs: positive.optional(),
  maxAttempts: positive.optional(),
  onParkRefused: z
    .custom<(refused: ParkRefused) => void>((v) => typeof v === 'function')
    .optional(),
});
