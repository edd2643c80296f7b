import { describe } from 'vitest';
import { CONFIGURATIONS } from '../../lab/configurations.js';
import { labScenarioSuite } from '../helpers/lab.js';

// The lab's catalogue as a test suite (issue #6 §5): one definition, two uses.
describe.concurrent('lab scenarios on RabbitMQ', () => {
  labScenarioSuite([CONFIGURATIONS['rabbitmq-worker'], CONFIGURATIONS['rabbitmq-amazonmq']]);
});
