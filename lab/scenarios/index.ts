import type { Scenario } from '../scenario.js';
import {
  concurrencyDuplicates,
  crashAfterCommit,
  duplicatePublish,
  happyPath,
  outOfStock,
} from './delivery.js';
import { pinnedXmin } from './horizon.js';
import { outOfOrder } from './ordering.js';
import { dbOutageLong, dbOutageShort, retryAckLost, slowProcessing } from './outages.js';
import { parkingUnavailable, poison, redriveAfterFix } from './parking.js';
import {
  consumerPausedPastLease,
  relayKilledMidWindow,
  repeatedKillUnderLoad,
} from './processes.js';
import {
  brokerThrottled,
  publishPartiallyFailed,
  sqsReordered,
  sqsSpontaneousDuplicate,
  staleAck,
} from './realBrokers.js';
import { brokerDownRelay, relayCrash, unroutable } from './relay.js';

/** The first catalogue: the faults the lab injects itself (fault points, proxies, locks). */
export const CORE_SCENARIOS: Scenario[] = [
  happyPath,
  duplicatePublish,
  crashAfterCommit,
  dbOutageShort,
  dbOutageLong,
  poison,
  retryAckLost,
  unroutable,
  outOfOrder,
  parkingUnavailable,
  brokerDownRelay,
  relayCrash,
  slowProcessing,
  outOfStock,
  redriveAfterFix,
  concurrencyDuplicates,
];

/** What real brokers do that emulators do not (the SQS fault layer; RabbitMQ's counterparts). */
export const REAL_BROKER_SCENARIOS: Scenario[] = [
  sqsSpontaneousDuplicate,
  sqsReordered,
  publishPartiallyFailed,
  brokerThrottled,
  staleAck,
];

/** Real processes killed and frozen, and a database whose horizon a session pins. */
export const PROCESS_SCENARIOS: Scenario[] = [
  consumerPausedPastLease,
  repeatedKillUnderLoad,
  relayKilledMidWindow,
  pinnedXmin,
];

/** The catalogue, in reading order. */
export const SCENARIOS: Scenario[] = [
  ...CORE_SCENARIOS,
  ...REAL_BROKER_SCENARIOS,
  ...PROCESS_SCENARIOS,
];

/** Parses a comma list of scenario ids (all when empty). */
export function parseScenarios(list: string | undefined): Scenario[] {
  if (!list) return SCENARIOS;
  return list
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((id) => {
      const s = SCENARIOS.find((x) => x.id === id);
      if (!s) {
        throw new Error(
          `unknown scenario "${id}" (known: ${SCENARIOS.map((x) => x.id).join(', ')})`,
        );
      }
      return s;
    });
}
