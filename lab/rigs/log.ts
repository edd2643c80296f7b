import { createLogger } from '../../shared/logger.js';

/** Created on first use, so the entry point's POWERTOOLS_LOG_LEVEL applies (imports run first). */
let labLogger: ReturnType<typeof createLogger> | undefined;
export const log = () => {
  labLogger ??= createLogger('lab');
  return labLogger;
};
