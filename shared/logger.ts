import { Logger } from '@aws-lambda-powertools/logger';

/**
 * Structured JSON logs (Powertools). Level from POWERTOOLS_LOG_LEVEL (default INFO);
 * tests set it to WARN.
 */
export function createLogger(serviceName: string): Logger {
  return new Logger({ serviceName });
}

export type { Logger };
