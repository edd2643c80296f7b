import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The repository root: the nearest folder above this module with `cdk.json`. The infra code may
 * run from a bundle elsewhere in the tree (the benchmarks bundle `dev`, which synthesizes the
 * templates), where paths relative to the module would be wrong.
 */
export const ROOT = (() => {
  const here = dirname(fileURLToPath(import.meta.url));
  let dir = here;
  while (!existsSync(join(dir, 'cdk.json'))) {
    const up = dirname(dir);
    if (up === dir) return join(here, '..');
    dir = up;
  }
  return dir;
})();

/** The services' migrations every deployment ships (`shared/pipeline/migrations`). */
export const MIGRATIONS_SOURCE = join(ROOT, 'shared', 'pipeline', 'migrations');
