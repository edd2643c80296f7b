import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRICS_NAMESPACE } from '../config/constants.js';
import type { ParkRefused } from './driver.js';

/** CloudWatch metrics of the inventory consumer (namespace ReliableMessaging). */
export const CONSUMER_METRICS = {
  /**
   * A park the backend could not make: the parking copy was not confirmed (RabbitMQ: the DLX
   * route or the parking queue is missing or full; SQS: the parking send failed). 1 per message.
   */
  parkRefused: 'ParkRefused',
} as const;

/** The `service` dimension of the consumer's metrics (both reserve functions). */
export const CONSUMER_METRICS_SERVICE = 'inventory-consumer';

/**
 * Publishes `ParkRefused` (1, dimensions `service`, `Transport`) as CloudWatch EMF on stdout, at
 * once (the message's fate is in its metadata): the alarm that the parking lot itself is
 * unavailable. The message is not lost (RabbitMQ holds it for dead lettering or redelivers it; SQS
 * redelivers it), but it is not parked either.
 */
export function publishParkRefused(transport: string, refused: ParkRefused): void {
  const m = new Metrics({
    namespace: METRICS_NAMESPACE,
    serviceName: CONSUMER_METRICS_SERVICE,
    defaultDimensions: { Transport: transport },
  });
  m.addMetric(CONSUMER_METRICS.parkRefused, MetricUnit.Count, 1);
  m.addMetadata('messageId', refused.messageId ?? '(none)');
  m.addMetadata('fate', refused.fate);
  m.addMetadata('error', refused.error.slice(0, 256));
  m.publishStoredMetrics();
}
