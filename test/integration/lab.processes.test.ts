import { describe } from 'vitest';
import { CONFIGURATION_IDS, CONFIGURATIONS } from '../../lab/configurations.js';
import { PROCESS_SCENARIOS } from '../../lab/scenarios/index.js';
import { labScenarioSuite } from '../helpers/lab.js';

// The consumer and the relay as child processes, SIGKILLed and SIGSTOPped; a pinned horizon.
describe.concurrent('lab: real processes killed and frozen, a pinned horizon', () => {
  labScenarioSuite(
    CONFIGURATION_IDS.map((id) => CONFIGURATIONS[id]),
    PROCESS_SCENARIOS,
  );
});
