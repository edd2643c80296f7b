import { ConfigError, type Env } from '../config/env.js';
import type { Backend } from '../port/types.js';
import { memoryModule } from './memory/index.js';
import type { BackendBase, TransportModule } from './module.js';
import { natsModule } from './nats/index.js';
import { rabbitmqModule } from './rabbitmq/index.js';
import { sqsModule } from './sqs/index.js';

/**
 * The registry: every backend's module by name, for runtimes that choose the transport at run
 * time (`dev`, the CLI, the lab, the soak, the benchmarks). A Lambda bundle imports its own
 * backend's module instead, so that it does not carry the others' clients. A new backend is one
 * line here (docs/adding-a-transport.md).
 */
export const TRANSPORTS = {
  rabbitmq: rabbitmqModule,
  sqs: sqsModule,
  memory: memoryModule,
  'nats-jetstream': natsModule,
} as const;

export type TransportName = keyof typeof TRANSPORTS;
type ModuleOf<N extends TransportName> = (typeof TRANSPORTS)[N];
export type ConfigOf<N extends TransportName> = Parameters<ModuleOf<N>['create']>[0];
export type BackendOf<N extends TransportName> = ReturnType<ModuleOf<N>['create']>;

export const TRANSPORT_NAMES = Object.keys(TRANSPORTS) as TransportName[];

/** Whether `name` is a registered transport. */
export const isTransportName = (name: string): name is TransportName => name in TRANSPORTS;

/** The module registered under `name`; a `ConfigError` naming the registered ones otherwise. */
export function transportModule<N extends TransportName>(name: N): ModuleOf<N>;
export function transportModule(name: string): TransportModule;
export function transportModule(name: string): TransportModule {
  if (!isTransportName(name)) {
    throw new ConfigError(`unknown transport "${name}" (one of: ${TRANSPORT_NAMES.join(', ')})`);
  }
  return TRANSPORTS[name] as TransportModule;
}

/** A backend from its module's configuration, checked by the module's schema first. */
export function createBackend<N extends TransportName>(name: N, config: ConfigOf<N>): BackendOf<N> {
  return backendFromConfig(name, config) as BackendOf<N>;
}

/**
 * A backend from a configuration read at run time (a child process's JSON): the transport's
 * schema checks it, and a `ConfigError` names the first setting that is wrong.
 */
export function backendFromConfig(name: string, config: unknown): Backend {
  const module = transportModule(name) as TransportModule<object, Backend>;
  const parsed = module.configSchema.safeParse(config);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(
      `${name} configuration: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}`,
    );
  }
  return module.create(parsed.data);
}

/** A backend configured from the runtime environment (`AMQP_URL`, `SQS_ENDPOINT`, …). */
export function backendFromEnv<N extends TransportName>(
  name: N,
  env: Env,
  base: BackendBase & Partial<ConfigOf<N>>,
): BackendOf<N> {
  const module = transportModule(name) as TransportModule<object, Backend>;
  return createBackend(name, module.fromEnv(env, base) as ConfigOf<N>);
}

export type { BackendBase, TransportModule } from './module.js';
