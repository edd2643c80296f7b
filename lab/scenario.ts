import type { Configuration } from './configurations.js';
import type { Measurements } from './measure.js';
import type { Rig } from './rigs/rig.js';
import type { RigOptions } from './rigs/types.js';
import { fifoOnlyForOrder } from './scenarios/common.js';
import type { Check } from './types.js';

/** A scenario does not apply to a configuration: why, and what happens there instead. */
export interface NotApplicable {
  /**
   * Why. A reason that starts with `emulator:` says the local emulation cannot reproduce the
   * behaviour (the reports then show `not reproducible here`, not `n/a`).
   */
  reason: string;
  instead: string;
}

/**
 * One fault scenario: a small script over the real pipeline, and the invariant it
 * asserts. The same definition runs in `npm start` (the lab) and in the test suite.
 */
export interface Scenario {
  id: string;
  title: string;
  /** What the scenario does to the pipeline, in one or two sentences. */
  stimulus: string;
  /** The invariant, in words (the checks below are its executable form). */
  invariant: string;
  /** Where it does not apply (default: {@link fifoOnlyForOrder}, everywhere but SQS FIFO). */
  notApplicable?(configuration: Configuration): NotApplicable | undefined;
  /**
   * Why it does not apply to the peer configurations, when it does not (it exercises a part of
   * ours the peers do not replace, or a mechanism they do not have).
   */
  forPeers?: NotApplicable;
  /** Why it does not apply to one peer configuration, when only some peers are concerned. */
  forPeer?(configuration: Configuration): NotApplicable | undefined;
  rig?: RigOptions;
  /**
   * Runs after the parallel runs, with nothing else running (its own configurations at once):
   * it loads the machine, or it measures timings others would disturb.
   */
  alone?: boolean;
  /** Drives the pipeline until its final state (waits on conditions, with timeouts). */
  run(rig: Rig): Promise<void>;
  /** The invariant, checked on what the journal, the database and the broker say. */
  check(rig: Rig, m: Measurements): Promise<Check[]> | Check[];
  /** One line on the mechanism that produced the result, from the measurements. */
  note(rig: Rig, m: Measurements): string;
}

/** Why a scenario does not apply to a configuration: its own rule, else {@link fifoOnlyForOrder}. */
export const notApplicableTo = (scenario: Scenario, configuration: Configuration) =>
  (scenario.notApplicable ?? fifoOnlyForOrder)(configuration);
