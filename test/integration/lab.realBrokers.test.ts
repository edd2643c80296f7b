import { describe } from 'vitest';
import { CONFIGURATION_IDS, CONFIGURATIONS } from '../../lab/configurations.js';
import { REAL_BROKER_SCENARIOS } from '../../lab/scenarios/index.js';
import { labScenarioSuite } from '../helpers/lab.js';

// What real brokers do that the emulator does not (SQS through the run's fault layer,
// devkit/emulators/sqsFaults.ts; RabbitMQ's counterparts), on every configuration.
describe.concurrent('lab: what real brokers do (SQS fault layer, RabbitMQ counterparts)', () => {
  labScenarioSuite(
    CONFIGURATION_IDS.map((id) => CONFIGURATIONS[id]),
    REAL_BROKER_SCENARIOS,
  );
});
