import type { RunningConsumer } from '../port/types.js';

/** One worker of a backend's in-process consumer: its counts, and how often it reconnected. */
export interface Worker {
  readonly stats: RunningConsumer['stats'];
  readonly reconnects: number;
  stop(): Promise<void>;
}

/** Several workers of one `consume` call as one running consumer (their counts summed). */
export function runningWorkers(
  workers: readonly Worker[],
): RunningConsumer & { readonly reconnects: number } {
  const sum = (of: (w: Worker) => number) => workers.reduce((n, w) => n + of(w), 0);
  return {
    get stats() {
      return {
        batches: sum((w) => w.stats.batches),
        messages: sum((w) => w.stats.messages),
        givenBack: sum((w) => w.stats.givenBack),
      };
    },
    get reconnects() {
      return sum((w) => w.reconnects);
    },
    stop: async () => {
      await Promise.all(workers.map((w) => w.stop()));
    },
  };
}
