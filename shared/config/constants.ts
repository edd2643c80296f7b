/** The library's own settings. The example pipeline's names are in `shared/pipeline/constants.ts`. */

/**
 * Unacknowledged deliveries per worker channel (never 0, which would mean unlimited), and so the
 * largest batch in one transaction: as large as the Amazon MQ trigger's batch (AWS's default, 100). Measured: with
 * 16, one worker at 500 orders/s on a loaded 2-core machine committed at most 16 messages per
 * transaction, close to the offered rate, and the queue grew (end-to-end p99 700–830 ms;
 * 140–180 ms with 100).
 */
export const CONSUMER_PREFETCH = 100;

/** The CloudWatch namespace of every metric the pipeline publishes. */
export const METRICS_NAMESPACE = 'ReliableMessaging';
