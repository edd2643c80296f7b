import type { Scenario } from '../types.js';
import {
  concurrencyDuplicates,
  crashAfterCommit,
  duplicatePublish,
  happyPath,
  outOfStock,
} from './delivery.js';
import { outOfOrder } from './ordering.js';
import { dbOutageLong, dbOutageShort, retryAckLost, slowProcessing } from './outages.js';
import { parkingUnavailable, poison, redriveAfterFix } from './parking.js';
import { brokerDownRelay, relayCrash, unroutable } from './relay.js';

/** The catalogue, in reading order. */
export const SCENARIOS: Scenario[] = [
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
