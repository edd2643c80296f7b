import { randomUUID } from 'node:crypto';
import type { ScheduledEvent } from 'aws-lambda';
import type { Logger } from '../../shared/logger.js';

export interface ScheduleTriggerOptions {
  /** The rule's period (`rate(1 minute)` → 60000). */
  rateMs: number;
  /** For the event's `resources`. */
  ruleArn: string;
  region?: string;
  /** Fire once at start (default true), then every `rateMs`. */
  immediately?: boolean;
}

/**
 * Waits before retrying a failed invocation: EventBridge invokes Lambda asynchronously, and
 * Lambda retries a failed asynchronous invocation twice, one and two minutes later (Lambda DG,
 * "Asynchronous invocation").
 */
const RETRY_DELAYS_MS = [60_000, 120_000];

export type ScheduledHandler = (event: ScheduledEvent) => Promise<unknown>;

/** The event an EventBridge schedule rule sends (Lambda DG, "Using Lambda with EventBridge"). */
export function scheduledEvent(options: { ruleArn: string; region?: string }): ScheduledEvent {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: '000000000000',
    time: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
    region: options.region ?? 'us-east-1',
    resources: [options.ruleArn],
    detail: {},
  };
}

/**
 * Local emulation of an EventBridge schedule rule targeting a function: an invocation every
 * `rateMs`, whether or not the previous one is still running (EventBridge does not wait), each
 * failed one retried as Lambda retries asynchronous invocations. EventBridge documents no start
 * offset for a rate rule; the emulation fires at once, then every period.
 */
export class ScheduleTrigger {
  readonly stats = { invocations: 0, failures: 0, retries: 0 };
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly waits = new Map<NodeJS.Timeout, () => void>();
  private stopped = false;

  constructor(
    private readonly deps: { handler: ScheduledHandler; logger?: Logger | undefined },
    private readonly options: ScheduleTriggerOptions,
  ) {}

  start(): void {
    this.stopped = false;
    if (this.options.immediately !== false) this.fire();
    this.timer = setInterval(() => this.fire(), this.options.rateMs);
  }

  private fire(): void {
    const event = scheduledEvent(this.options);
    const run = this.invoke(event, 0).finally(() => this.inFlight.delete(run));
    this.inFlight.add(run);
  }

  private async invoke(event: ScheduledEvent, attempt: number): Promise<void> {
    if (this.stopped) return;
    this.stats.invocations++;
    try {
      await this.deps.handler(event);
    } catch (err) {
      this.stats.failures++;
      const delay = RETRY_DELAYS_MS[attempt];
      this.deps.logger?.warn('schedule: invocation failed', {
        attempt,
        retryInMs: delay ?? null,
        error: (err as Error).message,
      });
      if (delay === undefined || this.stopped) return;
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          this.waits.delete(t);
          resolve();
        }, delay);
        this.waits.set(t, resolve);
      });
      this.stats.retries++;
      await this.invoke(event, attempt + 1);
    }
  }

  /**
   * Stops firing and drops pending retries; invocations in flight finish first unless `wait` is
   * false (a process about to exit).
   */
  async stop(options: { wait?: boolean } = {}): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    for (const [t, resolve] of this.waits) {
      clearTimeout(t);
      resolve();
    }
    this.waits.clear();
    if (options.wait !== false) await Promise.allSettled([...this.inFlight]);
  }
}
