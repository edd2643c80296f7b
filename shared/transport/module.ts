import { z } from 'zod';
import type { Retention, RetryBudget } from '../config/budget.js';
import type { Env } from '../config/env.js';
import type { Logger } from '../logger.js';
import type { Backend, Capabilities, Topology } from '../port/types.js';

/** What every backend needs beyond its own settings. */
export interface BackendBase {
  budget: RetryBudget;
  retention: Retention;
  /** Who parks, for diagnoses (`inventory@<version>`). */
  consumer: string;
  /** The streams and subscriptions, by name: the service's own (`Topology`). */
  topology: Topology;
  logger?: Logger | undefined;
}

/**
 * A transport backend as one module: its name, what it can do, its configuration (checked by
 * `configSchema`, read from the runtime environment by `fromEnv`) and how to build it. Each
 * backend's folder exports one; the registry (`shared/transport/index.ts`) maps names to them.
 * What a module must provide, and how to test it, is in docs/adding-a-transport.md.
 */
export interface TransportModule<C extends object = object, B extends Backend = Backend> {
  readonly name: string;
  /** What its backends can do with the default configuration (`Backend.capabilities` is exact). */
  readonly capabilities: Capabilities;
  /** What a backend with these settings can do, where settings change it (SQS FIFO queues). */
  capabilitiesOf?(config: Partial<C>): Capabilities;
  /** Checks a configuration before `create` (the registry parses with it). */
  readonly configSchema: z.ZodType<C>;
  /** One line for `--help` and reports: what it is, and where it runs. */
  readonly description: string;
  /** The configuration from the runtime environment (the local services, or a deployment's). */
  fromEnv(env: Env, base: BackendBase & Partial<C>): C;
  create(config: C): B;
}

const name = z.string().min(1);
const patterns = z.array(name).min(1);

/** A topology whose subscriptions and taps read streams it has. */
export const topologySchema = z
  .object({
    streams: z.record(name, name).refine((s) => Object.keys(s).length > 0, 'at least one stream'),
    subscriptions: z.record(
      name,
      z.object({
        queue: name,
        stream: name,
        types: patterns,
        failures: z.enum(['retries', 'redelivery']),
      }),
    ),
    taps: z.array(z.object({ queue: name, stream: name, types: patterns })).optional(),
  })
  .superRefine((t, ctx) => {
    const reads = [
      ...Object.entries(t.subscriptions).map(([n, s]) => [`subscriptions.${n}`, s.stream]),
      ...(t.taps ?? []).map((tap, i) => [`taps.${i}`, tap.stream]),
    ];
    for (const [path, stream] of reads) {
      if (!((stream as string) in t.streams)) {
        ctx.addIssue({ code: 'custom', message: `${path}: no stream "${stream}"` });
      }
    }
  }) satisfies z.ZodType<Topology>;

/** The schema of what every backend configuration carries (`BackendBase`). */
export const backendBaseSchema = z.looseObject({
  budget: z.custom<RetryBudget>((v) => typeof v === 'object' && v !== null, 'a retry budget'),
  retention: z.custom<Retention>((v) => typeof v === 'object' && v !== null, 'a retention'),
  consumer: z.string().min(1),
  topology: topologySchema,
  logger: z.custom<Logger>().optional(),
});

/** A URL as the WHATWG parser reads it. */
export const url = () => z.string().refine((v) => URL.canParse(v), 'a URL');

/** A setting that is a value or a function resolving it (credentials read on first connect). */
export const resolvable = <T extends z.ZodType>(value: T) =>
  z.union([value, z.custom<() => Promise<z.infer<T>>>((v) => typeof v === 'function')]);
