import { createScratch } from '../../devkit/scratch.js';
import type { Configuration } from '../configurations.js';
import type { LabServices, LabSettings } from '../settings.js';
import { RabbitRig } from './rabbitmq.js';
import type { Rig, RigOptions } from './rig.js';
import { SqsRig } from './sqs.js';

export { type ConsumerOptions, type Mark, Rig, type RigOptions } from './rig.js';

/**
 * The rig of one run on one configuration: a scratch environment of its own (database, and a
 * virtual host for RabbitMQ or a queue prefix for SQS), the configuration's backend on it,
 * prepared inside the rig's fault scope. On failure everything created is removed again.
 */
export async function createRig(
  configuration: Configuration,
  settings: LabSettings,
  services: LabServices,
  label: string,
  options: RigOptions = {},
): Promise<Rig> {
  // A small pool: several runs at once share one PostgreSQL (max_connections is often 100).
  const scratch = await createScratch(services, `lab_${label}`, {
    poolSize: 5,
    vhost: configuration.transport === 'rabbitmq',
  });
  let rig: Rig;
  try {
    rig =
      configuration.transport === 'rabbitmq'
        ? new RabbitRig(configuration, settings, services, scratch, options)
        : new SqsRig(configuration, settings, services, scratch, options);
  } catch (err) {
    await scratch.close().catch(() => {});
    throw err;
  }
  try {
    await rig.faults.run(() => rig.prepare());
    return rig;
  } catch (err) {
    await rig.close();
    throw err;
  }
}
