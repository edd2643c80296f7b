import { GenericContainer, type StartedTestContainer, Wait } from 'testcontainers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CONTAINER_LABEL,
  containerEngine,
  onLoopback,
  waitForManagement,
} from '../../devkit/containers.js';
import { freePort } from '../../devkit/freePort.js';
import {
  type CommandRunner,
  checkRabbitManagement,
  enableLocalManagement,
} from '../../devkit/preflight.js';

/**
 * The preflight's "management plugin off" path on a real broker of its own: a RabbitMQ container
 * started with no plugins, listening on the same ports inside and outside, and the RabbitMQ tools
 * run inside it (the machine's shared broker is never touched). Needs a container engine with a
 * RabbitMQ image it already has; skipped otherwise.
 */
const engine = await containerEngine();
const choice = 'reason' in engine ? engine : await engine.choose('rabbitmq');
const image = 'image' in choice && !choice.pull ? choice.image : undefined;
if (!image)
  console.log(
    `management plugin test skipped: ${'reason' in choice ? choice.reason : 'image would be pulled'}`,
  );

describe.skipIf(!image)('Function: enableLocalManagement, on a broker whose plugin is off', () => {
  let container: StartedTestContainer | undefined;
  let amqpUrl = '';
  let managementUrl = '';

  beforeAll(async () => {
    const amqp = await freePort();
    const management = await freePort();
    container = await onLoopback(
      new GenericContainer(image as string)
        .withEnvironment({
          // no enabled-plugins file: the broker starts with no plugin at all
          RABBITMQ_ENABLED_PLUGINS_FILE: '/var/lib/rabbitmq/enabled_plugins.none',
          RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: `-rabbit tcp_listeners [${amqp}] -rabbitmq_management tcp_config [{port,${management}}]`,
        })
        .withExposedPorts(
          { container: amqp, host: amqp },
          { container: management, host: management },
        )
        .withLabels({ [CONTAINER_LABEL]: 'test' })
        .withWaitStrategy(Wait.forLogMessage('Server startup complete'))
        .withStartupTimeout(120_000),
    ).start();
    amqpUrl = `amqp://guest:guest@127.0.0.1:${amqp}`;
    managementUrl = `http://guest:guest@127.0.0.1:${management}`;
  }, 150_000);
  afterAll(async () => {
    await container?.stop();
  });

  it("turns it on with the broker's own tools, says so in one line, and the API answers", async () => {
    // Prepare
    const c = container as StartedTestContainer;
    const run: CommandRunner = async (command, args) => {
      const r = await c.exec([command, ...args]);
      return { status: r.exitCode, stdout: r.stdout, stderr: r.stderr };
    };
    const lines: string[] = [];
    expect(await checkRabbitManagement(managementUrl, 1_000)).toMatchObject({
      service: 'RabbitMQ management API',
    });
    // Act
    const result = await enableLocalManagement(amqpUrl, managementUrl, {
      run,
      log: (line) => lines.push(line),
      waitManagement: waitForManagement,
    });
    // Assess
    expect(result).toEqual({ enabled: true });
    expect(lines).toHaveLength(1);
    expect(await checkRabbitManagement(managementUrl)).toBeUndefined();
  });
});
