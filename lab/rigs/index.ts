import { startSqsFaultLayer } from '../../devkit/emulators/sqsFaults.js';
import { LocalPipeline } from '../../devkit/lambda/localPipeline.js';
import { journalEntryOf } from '../../devkit/processes.js';
import { createScratch, type ScratchEnvironment } from '../../devkit/scratch.js';
import type { TransportName } from '../../shared/transport/index.js';
import { pipelineOverrides } from '../bundles.js';
import type { Configuration } from '../configurations.js';
import type { LabServices, LabSettings } from '../settings.js';
import { NatsRig } from './nats.js';
import { RabbitRig } from './rabbitmq.js';
import type { Rig } from './rig.js';
import { SqsRig } from './sqs.js';

import type { RigOptions } from './types.js';

export { Rig } from './rig.js';

type RigFactory = (
  configuration: Configuration,
  settings: LabSettings,
  services: LabServices,
  scratch: ScratchEnvironment,
  options: RigOptions,
) => Promise<Rig>;

/** The lab's rig of each transport it runs on (a rig closes what its factory started). */
const RIGS: Partial<Record<TransportName, RigFactory>> = {
  rabbitmq: async (...args) => new RabbitRig(...args),
  'nats-jetstream': async (...args) => new NatsRig(...args),
  sqs: async (configuration, settings, services, scratch, options) => {
    const faults = await startSqsFaultLayer(services.sqsEndpoint);
    try {
      return new SqsRig(configuration, settings, services, scratch, options, faults);
    } catch (err) {
      await faults.close().catch(() => {});
      throw err;
    }
  },
};

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
    transports: [configuration.transport],
    // each service in its own database, as they run
    layout: 'services',
  });
  const create = RIGS[configuration.transport];
  if (!create) {
    await scratch.close().catch(() => {});
    throw new Error(`the lab has no rig for ${configuration.transport}`);
  }
  let rig: Rig;
  try {
    rig = await create(configuration, settings, services, scratch, options);
  } catch (err) {
    await scratch.close().catch(() => {});
    throw err;
  }
  try {
    if (settings.code === 'bundles') await deployBundles(rig, configuration, settings, services);
    await rig.faults.run(() => rig.prepare());
    rig.startRelaySchedule();
    return rig;
  } catch (err) {
    await rig.close();
    throw err;
  }
}

/**
 * The run's deployed bundles (`--bundles`): the stacks synthesized with the run's settings and
 * budget, stood up on the run's database, vhost or queue prefix, and deployed (migrations and
 * broker topology by their custom resources, creating the app's database login and the broker's
 * pipeline user), before the rig prepares its own view (which then applies the lab's delivery
 * limit); their journal lines feed the run's journal.
 */
async function deployBundles(
  rig: Rig,
  configuration: Configuration,
  settings: LabSettings,
  services: LabServices,
): Promise<void> {
  if (!services.assemblies) throw new Error('--bundles: no synthesized assemblies');
  const assembly = await services.assemblies.get(
    configuration.transport,
    pipelineOverrides(settings, configuration, rig.budget),
  );
  const pipeline = await LocalPipeline.start(assembly, {
    name: rig.scratch.name,
    services: {
      databaseUrl: rig.scratch.database.url,
      amqpUrl: services.amqpUrl,
      managementUrl: services.managementUrl,
      // through the run's fault layer, as every other client of the run
      sqsEndpoint: rig.sqsEndpoint,
      secretsEndpoint: services.secretsEndpoint,
    },
    sqsQueuePrefix: rig.scratch.sqsPrefix,
    ...(rig.scratch.vhost ? { vhost: rig.scratch.vhost.vhost } : {}),
    onLog: (_fn, line) => {
      const entry = journalEntryOf(line);
      if (entry) rig.run.journal.record(entry);
    },
  });
  rig.useBundles(pipeline);
  await pipeline.deploy();
}
