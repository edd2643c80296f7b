import { describe } from 'vitest';
import { CONFIGURATIONS } from '../../lab/configurations.js';
import { labScenarioSuite } from '../helpers/lab.js';

// The lab's catalogue as a test suite: one definition, two uses.
describe.concurrent('lab scenarios on RabbitMQ', () => {
  labScenarioSuite([CONFIGURATIONS['rabbitmq-worker'], CONFIGURATIONS['rabbitmq-amazonmq']]);
});
