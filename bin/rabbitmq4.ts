import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import {
  CONTAINER_LABEL,
  containerEngine,
  type Engine,
  firstLine,
  forgetContainerEngine,
  IMAGES,
  startRabbitMqContainer,
  waitForManagement,
} from '../devkit/containers.js';
import { RabbitManagement } from '../shared/transport/rabbitmq/index.js';

/**
 * `npm run rabbitmq4 -- start|stop|status`: RabbitMQ 4 with its management plugin beside the
 * local broker, in a container started through the project's testcontainers path, on AMQP
 * 127.0.0.1:5673 and management 127.0.0.1:15673. The image is `RABBITMQ_IMAGE`, else
 * `rabbitmq:4.2-management` where a registry answers, else `local/rabbitmq:4-management`, built
 * from Debian trixie's package (4.0.5) on the first start and kept: later starts take seconds.
 * Where no engine answers but `dockerd` is installed, `start` starts one
 * (devkit/containers/engine.sh). Point any command at it with the printed variables.
 */
const ROLE = 'rabbitmq4';
const NAME = 'rm-rabbitmq4';
const PORTS = { amqp: 5673, management: 15673 };
const AMQP_URL = `amqp://guest:guest@127.0.0.1:${PORTS.amqp}`;
const MANAGEMENT_URL = `http://guest:guest@127.0.0.1:${PORTS.management}`;
const CONTAINERS_DIR = join(import.meta.dirname, '..', 'devkit', 'containers');

function printUrls(version: string): void {
  console.log(`RabbitMQ ${version}`);
  console.log(`  AMQP_URL=${AMQP_URL}`);
  console.log(`  RABBITMQ_MANAGEMENT_URL=${MANAGEMENT_URL}`);
}

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

function run(command: string, args: string[]): boolean {
  return spawnSync(command, args, { stdio: 'inherit' }).status === 0;
}

async function engineOrStart(): Promise<Engine> {
  let engine = await containerEngine();
  if ('reason' in engine && spawnSync('sh', ['-c', 'command -v dockerd']).status === 0) {
    if (!run('bash', [join(CONTAINERS_DIR, 'engine.sh'), 'start'])) fail(engine.reason);
    forgetContainerEngine();
    engine = await containerEngine();
  }
  if ('reason' in engine) {
    fail(
      `${engine.reason}: install and start one (as root: bash devkit/containers/engine.sh start)`,
    );
  }
  return engine;
}

async function existing(engine: Engine) {
  const found = await engine.client.container.fetchByLabel(CONTAINER_LABEL, ROLE);
  if (!found) return undefined;
  const info = await engine.client.container.inspect(found);
  return { container: found, running: info.State.Running };
}

const management = new RabbitManagement(MANAGEMENT_URL);

async function start(): Promise<void> {
  const started = Date.now();
  const engine = await engineOrStart();
  const found = await existing(engine);
  if (found?.running) {
    await waitForManagement(MANAGEMENT_URL, 60_000);
    console.log('already running');
    printUrls(await management.version());
    return;
  }
  if (found) await engine.client.container.remove(found.container, { removeVolumes: true });
  let choice = await engine.choose('rabbitmq');
  const spec = IMAGES.rabbitmq;
  if ('reason' in choice && !process.env[spec.env] && spec.build) {
    console.log(`building ${spec.local} from Debian's packages (once; kept in the engine)`);
    if (!run('bash', [join(CONTAINERS_DIR, 'build-images.sh'), spec.build])) {
      fail('the image build failed');
    }
    choice = await engine.choose('rabbitmq');
  }
  if ('reason' in choice) fail(`RabbitMQ 4 cannot start: ${choice.reason}`);
  console.log(`starting ${choice.image}${choice.pull ? ' (pulling it)' : ''}`);
  try {
    await startRabbitMqContainer(choice.image, {
      ports: PORTS,
      name: NAME,
      role: ROLE,
      keep: true,
    });
  } catch (err) {
    fail(`RabbitMQ 4 did not start: ${firstLine(err)}`);
  }
  console.log(`started in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  printUrls(await management.version());
}

async function stop(): Promise<void> {
  const engine = await containerEngine();
  if ('reason' in engine) {
    console.log('not running (no container engine)');
    return;
  }
  const found = await existing(engine);
  if (!found) {
    console.log('not running');
    return;
  }
  if (found.running) await engine.client.container.stop(found.container, { timeout: 10 });
  await engine.client.container.remove(found.container, { removeVolumes: true });
  console.log('stopped and removed');
}

async function status(): Promise<void> {
  const engine = await containerEngine();
  const found = 'reason' in engine ? undefined : await existing(engine);
  if (!found?.running) {
    console.log('not running');
    process.exit(1);
  }
  const v = await management.version().catch(() => undefined);
  if (!v) {
    console.log('running, management API not answering yet');
    process.exit(1);
  }
  printUrls(v);
}

const command = process.argv[2];
const commands: Record<string, () => Promise<void>> = { start, stop, status };
const action = command ? commands[command] : undefined;
if (!action) fail('usage: npm run rabbitmq4 -- start|stop|status');
await action();
