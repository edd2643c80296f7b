import { SNSClient } from '@aws-sdk/client-sns';
import { SQSClient } from '@aws-sdk/client-sqs';

export interface SqsClientOptions {
  /** A local SQS-compatible server (fauxqs, moto, LocalStack); unset = AWS. */
  endpoint?: string | undefined;
  region?: string;
  /** Per-request timeout (ms), so a dead endpoint fails fast instead of hanging a relay round. */
  requestTimeoutMs?: number;
  maxAttempts?: number;
}

/**
 * An SQS client. Against a local endpoint it uses fixed dummy credentials and always sends
 * requests to the configured endpoint (local servers' queue URLs may name hosts that do not
 * resolve, e.g. `sqs.<region>.localhost`; moto needs `useQueueUrlAsEndpoint: false`).
 */
export function createSqsClient(options: SqsClientOptions = {}): SQSClient {
  const { local, ...settings } = clientSettings(options);
  return new SQSClient({ ...settings, ...(local ? { useQueueUrlAsEndpoint: false } : {}) });
}

/**
 * An SNS client with the same settings, for streams published through a topic (fauxqs serves SNS
 * on the same endpoint as SQS).
 */
export function createSnsClient(options: SqsClientOptions = {}): SNSClient {
  const { local: _local, ...settings } = clientSettings(options);
  return new SNSClient(settings);
}

function clientSettings(options: SqsClientOptions) {
  // an amazonaws.com endpoint (e.g. the CLI against a deployed pipeline) is AWS: real credentials
  const local =
    Boolean(options.endpoint) &&
    !new URL(options.endpoint as string).hostname.endsWith('.amazonaws.com');
  return {
    local,
    region: options.region ?? process.env.AWS_REGION ?? 'us-east-1',
    maxAttempts: options.maxAttempts ?? 2,
    requestHandler: { requestTimeout: options.requestTimeoutMs ?? 5_000, connectionTimeout: 2_000 },
    ...(local
      ? {
          endpoint: options.endpoint,
          credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
        }
      : options.endpoint
        ? { endpoint: options.endpoint }
        : {}),
  };
}
