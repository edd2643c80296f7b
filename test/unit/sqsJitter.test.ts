import { describe, expect, it } from 'vitest';
import { sqsRetryDelaySeconds } from '../../shared/transport/sqs/SqsSettle.js';

describe('sqsRetryDelaySeconds: the ladder step with the budget jitter, in whole seconds', () => {
  it('without jitter: the step rounded up, as before', () => {
    expect(sqsRetryDelaySeconds(1_000)).toBe(1);
    expect(sqsRetryDelaySeconds(1_500, 0)).toBe(2);
  });

  it('the production ladder (±10 %): 30 s within 27…33 s, 5 min within 270…330 s, spread', () => {
    for (const [step, lo, hi] of [
      [30_000, 27, 33],
      [300_000, 270, 330],
    ] as const) {
      const draws = Array.from({ length: 200 }, () => sqsRetryDelaySeconds(step, 0.1));
      expect(Math.min(...draws)).toBeGreaterThanOrEqual(lo);
      expect(Math.max(...draws)).toBeLessThanOrEqual(hi);
      expect(new Set(draws).size).toBeGreaterThan(1);
    }
    expect(sqsRetryDelaySeconds(30_000, 0.1, () => 0)).toBe(27);
    expect(sqsRetryDelaySeconds(30_000, 0.1, () => 0.999_999)).toBe(33);
  });

  it('a step whose range holds one whole second or none is not jittered', () => {
    expect(sqsRetryDelaySeconds(5_000, 0.1, () => 0.999)).toBe(5); // 4.5…5.5 s
    expect(sqsRetryDelaySeconds(1_500, 0.1, () => 0.999)).toBe(2); // 1.35…1.65 s: rounded up
  });
});
