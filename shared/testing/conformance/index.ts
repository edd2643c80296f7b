import { loadEnv } from '../../config/env.js';
import { NATS_DEFAULTS } from '../../transport/nats/constants.js';
import type { ConformanceOptions, ConformanceReport, ConformanceServices } from './types.js';

export { renderText, writeReport } from './report.js';
export {
  type ConformanceOptions,
  type ConformanceReport,
  type ConformanceServices,
  type ConformanceSubject,
  type MessageTimeline,
  SCENARIO_NAMES,
  type ScenarioAccounting,
  type ScenarioName,
  type ScenarioResult,
  type TimelineEntry,
} from './types.js';

/**
 * Runs the conformance scenarios against a subject (see `ConformanceSubject`) on one transport,
 * each on a scratch database and broker namespace of its own, and resolves with the report
 * (written as `conformance.json` and `conformance.md` into `out` when given). It rejects only
 * when the run cannot start: a service that does not answer, an unknown transport or scenario, a
 * subject module that cannot be used. The kit and its clients load on the first call.
 */
export async function runConformance(options: ConformanceOptions): Promise<ConformanceReport> {
  const { runConformance: run } = await import('./runner.js');
  return run(options);
}

/**
 * The services from the environment, as the rest of the project reads them: `DATABASE_URL`,
 * `AMQP_URL`, `RABBITMQ_MANAGEMENT_URL`, `SQS_ENDPOINT`, `AWS_REGION` (with their defaults: the
 * local services) and `NATS_URL`.
 */
export function conformanceServicesFromEnv(
  source: NodeJS.ProcessEnv = process.env,
): ConformanceServices {
  const env = loadEnv(source);
  return {
    databaseUrl: env.DATABASE_URL,
    amqpUrl: env.AMQP_URL,
    managementUrl: env.RABBITMQ_MANAGEMENT_URL,
    sqsEndpoint: env.SQS_ENDPOINT,
    region: env.AWS_REGION,
    natsUrl: source.NATS_URL || NATS_DEFAULTS.servers,
  };
}
