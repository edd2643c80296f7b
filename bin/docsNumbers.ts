import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pipelineConfig } from '../infra/config.js';
import { renderDeployedNumbers } from '../lab/deployedNumbers.js';
import { REAL_TIME_SETTINGS, SCALED_SETTINGS } from '../lab/settings.js';

/** Writes docs/deployed-numbers.md from the stacks' configuration (`npm run docs:numbers`). */
const file = join(import.meta.dirname, '..', 'docs', 'deployed-numbers.md');
await writeFile(
  file,
  renderDeployedNumbers(pipelineConfig(), {
    scaled: SCALED_SETTINGS,
    realTime: REAL_TIME_SETTINGS,
  }),
);
console.log(`wrote ${file}`);
