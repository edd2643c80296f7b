import { describe, expect, it } from 'vitest';
import { lastThird, lossPercent } from '../../bench/pinnedHorizon.js';

describe('the pinned-xmin phase (bench/pinnedHorizon.ts)', () => {
  it('reports the loss in percent and the rate of the last third of the slices', () => {
    expect(lossPercent(4000, 3000)).toBe(25);
    expect(lossPercent(4000, 4400)).toBe(-10);
    expect(lossPercent(0, 10)).toBeNaN();
    expect(lastThird([4000, 3000, 2000, 1000, 900, 800])).toBe(850);
    expect(lastThird([10])).toBe(10);
  });
});
