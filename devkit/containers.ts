import { request } from 'node:http';
import { hostname } from 'node:os';
import type { ContainerRuntimeClient, GenericContainer } from 'testcontainers';
import { getOrSet } from './maps.js';
import { waitFor } from './waitFor.js';

/**
 * The project's container path (testcontainers): the fallback of `npm test` and `npm start` when
 * PostgreSQL or RabbitMQ does not answer, `npm run rabbitmq4`, and LocalStack for the SQS tests.
 *
 * No container start ever pulls an image where no registry answers: each image is looked up in
 * the engine first, and what cannot start is skipped with one line saying why. Images are named by
 * environment variables; unset, the registry's image is used where the engine has it or a registry
 * answers, else the image `devkit/containers/build-images.sh` builds from Debian's packages.
 */
export type ImageKind = 'postgres' | 'rabbitmq' | 'localstack';

export interface ImageSpec {
  /** The environment variable that names the image. */
  env: string;
  /** The default for engines that reach a registry. */
  registry: string;
  /** The image `devkit/containers/build-images.sh <build>` builds locally, if any. */
  local?: string;
  build?: string;
}

export const IMAGES: Record<ImageKind, ImageSpec> = {
  postgres: {
    env: 'POSTGRES_IMAGE',
    registry: 'postgres:15',
    local: 'local/postgres:15',
    build: 'postgres15',
  },
  rabbitmq: {
    env: 'RABBITMQ_IMAGE',
    registry: 'rabbitmq:4.2-management',
    local: 'local/rabbitmq:4-management',
    build: 'rabbitmq4',
  },
  localstack: { env: 'LOCALSTACK_IMAGE', registry: 'localstack/localstack:4' },
};

/** Every container this project starts carries this label (`docker ps --filter label=…`). */
export const CONTAINER_LABEL = 'reliable-messaging.role';

export type ImageChoice = { image: string; pull: boolean } | { reason: string };

/**
 * Which image to start for `kind`: the one the environment names (pulled only if a registry
 * answers), else the registry's default if the engine has it, else the local build if the engine
 * has it, else the registry's default if a registry answers. Otherwise a reason, never a pull.
 */
export async function chooseImage(
  kind: ImageKind,
  facts: {
    env: Record<string, string | undefined>;
    present(image: string): Promise<boolean>;
    registryAnswers(image: string): Promise<boolean>;
  },
): Promise<ImageChoice> {
  const spec = IMAGES[kind];
  const named = facts.env[spec.env];
  if (named) {
    if (await facts.present(named)) return { image: named, pull: false };
    if (await facts.registryAnswers(named)) return { image: named, pull: true };
    return {
      reason: `${named} (${spec.env}) is not in the engine and ${registryOf(named)} does not answer`,
    };
  }
  if (await facts.present(spec.registry)) return { image: spec.registry, pull: false };
  if (spec.local && (await facts.present(spec.local))) return { image: spec.local, pull: false };
  if (await facts.registryAnswers(spec.registry)) return { image: spec.registry, pull: true };
  const fix = spec.build
    ? `build ${spec.local} with devkit/containers/build-images.sh ${spec.build}`
    : `set ${spec.env} to an image the engine has`;
  return {
    reason: `no ${kind} image in the engine and ${registryOf(spec.registry)} does not answer (${fix})`,
  };
}

/** The registry host an image reference pulls from. */
export function registryOf(image: string): string {
  const first = image.split('/')[0] as string;
  const explicit = image.includes('/') && (/[.:]/.test(first) || first === 'localhost');
  return explicit ? first : 'registry-1.docker.io';
}

const registryChecks = new Map<string, Promise<boolean>>();

/** Whether the registry an image comes from answers HTTPS at all (any status), within 3 s. */
export function registryAnswers(image: string): Promise<boolean> {
  return getOrSet(registryChecks, registryOf(image), (host) =>
    fetch(`https://${host}/v2/`, { signal: AbortSignal.timeout(3_000) }).then(
      () => true,
      () => false,
    ),
  );
}

/** The engine's `/info` over its local socket (`DOCKER_HOST` unset or `unix://`), if it answers. */
function localEngineInfo(timeoutMs: number): Promise<{ Name?: string } | undefined> {
  const dockerHost = process.env.DOCKER_HOST;
  if (dockerHost && !dockerHost.startsWith('unix://')) return Promise.resolve(undefined);
  const socketPath = dockerHost ? dockerHost.slice('unix://'.length) : '/var/run/docker.sock';
  return new Promise((resolve) => {
    const req = request({ socketPath, path: '/info', timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        body += chunk;
      });
      res.on('end', () => {
        try {
          resolve(res.statusCode === 200 ? JSON.parse(body) : undefined);
        } catch {
          resolve(undefined);
        }
      });
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
    req.end();
  });
}

export interface Engine {
  client: ContainerRuntimeClient;
  choose(kind: ImageKind): Promise<ImageChoice>;
}

let enginePromise: Promise<Engine | { reason: string }> | undefined;

/** Looks for the engine again at the next `containerEngine()` (after starting one). */
export function forgetContainerEngine(): void {
  enginePromise = undefined;
}

/**
 * The container engine testcontainers talks to, or why there is none (one line). Before
 * testcontainers first looks, two of its defaults are adjusted for an engine without registry:
 * - `TESTCONTAINERS_HOST_OVERRIDE=localhost` when the engine runs on this very host (its name is
 *   ours): on a host that has a `/.dockerenv` testcontainers would otherwise reach published ports
 *   through the bridge gateway, or pull `alpine` to find one;
 * - `TESTCONTAINERS_RYUK_DISABLED=true` when the reaper's image is not in the engine and no
 *   registry answers (the containers are then stopped by whoever started them).
 * Both stay as set when the environment sets them.
 */
export function containerEngine(): Promise<Engine | { reason: string }> {
  enginePromise ??= (async (): Promise<Engine | { reason: string }> => {
    const info = await localEngineInfo(2_000);
    if (info?.Name && info.Name === hostname()) {
      process.env.TESTCONTAINERS_HOST_OVERRIDE ??= 'localhost';
    }
    let client: ContainerRuntimeClient;
    try {
      const { getContainerRuntimeClient } = await import('testcontainers');
      client = await Promise.race([
        getContainerRuntimeClient(),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error('no answer within 10 s')), 10_000).unref(),
        ),
      ]);
    } catch (err) {
      return { reason: `no container engine (${firstLine(err)})` };
    }
    const { ImageName } = await import('testcontainers');
    const present = (image: string) =>
      client.image.exists(ImageName.fromString(image)).catch(() => false);
    if (process.env.TESTCONTAINERS_RYUK_DISABLED === undefined) {
      const ryuk = process.env.RYUK_CONTAINER_IMAGE ?? 'testcontainers/ryuk:0.14.0';
      if (!(await present(ryuk)) && !(await registryAnswers(ryuk))) {
        process.env.TESTCONTAINERS_RYUK_DISABLED = 'true';
      }
    }
    return {
      client,
      choose: (kind) => chooseImage(kind, { env: process.env, present, registryAnswers }),
    };
  })();
  return enginePromise;
}

export const firstLine = (err: unknown) =>
  (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';

/**
 * Publishes every port the container binds on 127.0.0.1 only, whatever the engine's default
 * (testcontainers has no option for the host address; its bindings are plain Docker ones).
 */
export function onLoopback<T extends GenericContainer>(container: T): T {
  const { hostConfig } = container as unknown as {
    hostConfig: { PortBindings?: Record<string, { HostIp?: string; HostPort: string }[]> };
  };
  for (const bindings of Object.values(hostConfig.PortBindings ?? {})) {
    for (const b of bindings) b.HostIp = '127.0.0.1';
  }
  return container;
}

/** PostgreSQL in a fallback container (database `test`, user and password `postgres`). */
async function startPostgresContainer(image: string) {
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  const c = await onLoopback(
    new PostgreSqlContainer(image)
      .withUsername('postgres')
      .withPassword('postgres')
      .withDatabase('test')
      .withLabels({ [CONTAINER_LABEL]: 'fallback' }),
  ).start();
  const url = new URL(c.getConnectionUri());
  url.hostname = '127.0.0.1';
  return {
    databaseUrl: url.toString(),
    stop: () => c.stop(),
  };
}

/**
 * RabbitMQ with its management plugin in a container, guest/guest; ready when the management API
 * answers. `ports` fixes the host ports (else free ones); `name` and `role` find it again later;
 * `keep` leaves it to outlive this process (never reaped).
 */
export async function startRabbitMqContainer(
  image: string,
  options: {
    ports?: { amqp: number; management: number };
    name?: string;
    role?: string;
    keep?: boolean;
  } = {},
) {
  const { RabbitMQContainer } = await import('@testcontainers/rabbitmq');
  const { Wait } = await import('testcontainers');
  let container = new RabbitMQContainer(image)
    .withLabels({ [CONTAINER_LABEL]: options.role ?? 'rabbitmq' })
    .withStartupTimeout(120_000)
    .withWaitStrategy(
      Wait.forAll([
        Wait.forLogMessage('Server startup complete'),
        Wait.forHttp('/api/overview', 15672).withBasicCredentials('guest', 'guest'),
      ]),
    );
  if (options.ports) {
    container = container.withExposedPorts(
      { container: 5672, host: options.ports.amqp },
      { container: 15672, host: options.ports.management },
    );
  }
  if (options.name) container = container.withName(options.name);
  if (options.keep) container = container.withAutoCleanup(false);
  const c = await onLoopback(container).start();
  const amqpPort = c.getMappedPort(5672);
  const managementPort = c.getMappedPort(15672);
  return {
    amqpUrl: `amqp://guest:guest@127.0.0.1:${amqpPort}`,
    managementUrl: `http://guest:guest@127.0.0.1:${managementPort}`,
    stop: () => c.stop(),
  };
}

/**
 * `GET /api/overview` on the management API at `url`, with the URL's credentials as basic
 * authentication (fetch refuses credentials in the URL itself).
 */
export function managementOverview(url: string, timeoutMs: number): Promise<Response> {
  const u = new URL(url);
  const auth = Buffer.from(
    `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}`,
  ).toString('base64');
  u.username = '';
  u.password = '';
  return fetch(new URL('/api/overview', u), {
    headers: { authorization: `Basic ${auth}` },
    signal: AbortSignal.timeout(timeoutMs),
  });
}

/** Waits until `url`'s management API answers `/api/overview` (credentials in the URL). */
export async function waitForManagement(url: string, timeoutMs = 60_000): Promise<void> {
  await waitFor(async () => (await managementOverview(url, 2_000).catch(() => undefined))?.ok, {
    timeoutMs,
    intervalMs: 250,
    message: `the management API at ${new URL(url).host}`,
  });
}

export interface FallbackResult {
  databaseUrl?: string;
  amqpUrl?: string;
  managementUrl?: string;
  /** One line per container started (`PostgreSQL: local/postgres:15 at 127.0.0.1:…`). */
  started: string[];
  /** Per service asked for and not started: why (one line each). */
  notStarted: { service: 'PostgreSQL' | 'RabbitMQ'; reason: string }[];
  stop(): Promise<void>;
}

/**
 * Starts PostgreSQL and/or RabbitMQ in containers for the services that do not answer. Never
 * throws: what cannot start (no engine, no image, a failed start) is reported in `notStarted`.
 */
export async function startFallbackContainers(needs: {
  postgres?: boolean;
  rabbitmq?: boolean;
}): Promise<FallbackResult> {
  const stops: (() => Promise<unknown>)[] = [];
  const result: FallbackResult = {
    started: [],
    notStarted: [],
    stop: async () => {
      await Promise.all(stops.map((s) => s().catch(() => {})));
    },
  };
  const wanted = [
    ...(needs.postgres ? (['PostgreSQL'] as const) : []),
    ...(needs.rabbitmq ? (['RabbitMQ'] as const) : []),
  ];
  if (wanted.length === 0) return result;
  const engine = await containerEngine();
  if ('reason' in engine) {
    for (const service of wanted) result.notStarted.push({ service, reason: engine.reason });
    return result;
  }
  await Promise.all(
    wanted.map(async (service) => {
      const choice = await engine.choose(service === 'PostgreSQL' ? 'postgres' : 'rabbitmq');
      if ('reason' in choice) {
        result.notStarted.push({ service, reason: choice.reason });
        return;
      }
      try {
        if (service === 'PostgreSQL') {
          const pg = await startPostgresContainer(choice.image);
          stops.push(pg.stop);
          result.databaseUrl = pg.databaseUrl;
          result.started.push(`PostgreSQL: ${choice.image} at ${new URL(pg.databaseUrl).host}`);
        } else {
          const rabbit = await startRabbitMqContainer(choice.image, { role: 'fallback' });
          stops.push(rabbit.stop);
          result.amqpUrl = rabbit.amqpUrl;
          result.managementUrl = rabbit.managementUrl;
          result.started.push(
            `RabbitMQ: ${choice.image} at ${new URL(rabbit.amqpUrl).host} (management ${new URL(rabbit.managementUrl).host})`,
          );
        }
      } catch (err) {
        result.notStarted.push({
          service,
          reason: `${choice.image} did not start (${firstLine(err)})`,
        });
      }
    }),
  );
  return result;
}
