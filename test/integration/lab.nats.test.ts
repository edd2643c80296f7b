import { describe } from 'vitest';
import { CONFIGURATIONS } from '../../lab/configurations.js';
import { labScenarioSuite } from '../helpers/lab.js';

// The lab's catalogue as a test suite, on NATS JetStream (worker mode: nothing deploys it).
describe.concurrent('lab scenarios on NATS JetStream', () => {
  labScenarioSuite([CONFIGURATIONS['nats-jetstream']]);
});
