import { GetParameterCommand, PutParameterCommand, type SSMClient } from '@aws-sdk/client-ssm';

/**
 * What the relay remembers between invocations without asking the database: when a run last
 * touched the outboxes, when the last kicked run (traffic) was, and whether rows were left (due
 * later, or not decided because the broker or the database failed).
 */
export interface RelayState {
  /** Epoch ms of the end of the last run that read the outboxes. */
  lastCheckAt: number;
  /** Epoch ms of the end of the last kicked run, or of a sweep that found rows. */
  lastActivityAt: number;
  /** Rows were left unpublished (or the run could not tell). */
  pending: boolean;
}

export interface RelayStateStore {
  /** The stored state; undefined when none was stored yet. */
  get(): Promise<RelayState | undefined>;
  put(state: RelayState): Promise<void>;
}

export class MemoryRelayStateStore implements RelayStateStore {
  state: RelayState | undefined;
  async get() {
    return this.state;
  }
  async put(state: RelayState) {
    this.state = state;
  }
}

/**
 * The state in an SSM parameter (a String parameter the stack creates): a standard parameter's
 * `GetParameter`/`PutParameter` cost nothing at standard throughput (AWS Systems Manager pricing),
 * and neither wakes the database.
 */
export class SsmRelayStateStore implements RelayStateStore {
  constructor(
    private readonly client: SSMClient,
    private readonly name: string,
  ) {}

  async get(): Promise<RelayState | undefined> {
    const out = await this.client.send(new GetParameterCommand({ Name: this.name }));
    return parseRelayState(out.Parameter?.Value);
  }

  async put(state: RelayState): Promise<void> {
    await this.client.send(
      new PutParameterCommand({
        Name: this.name,
        Value: JSON.stringify(state),
        Type: 'String',
        Overwrite: true,
      }),
    );
  }
}

/** The stored value, or undefined when it is not a state (the stack's initial `{}`). */
export function parseRelayState(value: string | undefined): RelayState | undefined {
  if (!value) return undefined;
  try {
    const v = JSON.parse(value) as Partial<RelayState>;
    if (
      typeof v.lastCheckAt === 'number' &&
      typeof v.lastActivityAt === 'number' &&
      typeof v.pending === 'boolean'
    ) {
      return { lastCheckAt: v.lastCheckAt, lastActivityAt: v.lastActivityAt, pending: v.pending };
    }
  } catch {}
  return undefined;
}

export interface SweepPolicy {
  /** No sweep until this long after the last kicked run (ms). */
  quietMs: number;
  /** No sweep until this long after the last run on the database (ms). */
  intervalMs: number;
}

/**
 * Whether a scheduled tick reads the outboxes: at once when rows were left or nothing is known,
 * else only when the pipeline has been quiet for `quietMs` and the last look is `intervalMs` old.
 * While orders flow, the kicked runs publish; the sweep is the guarantee for a lost kick.
 */
export function sweepDue(state: RelayState | undefined, now: number, policy: SweepPolicy): boolean {
  if (!state || state.pending) return true;
  return (
    now - state.lastActivityAt >= policy.quietMs && now - state.lastCheckAt >= policy.intervalMs
  );
}
