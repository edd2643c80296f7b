import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** The installed version of an npm package, read from its package.json in node_modules. */
export function packageVersion(name: string): string {
  try {
    return (
      JSON.parse(readFileSync(require.resolve(`${name}/package.json`), 'utf8')) as {
        version: string;
      }
    ).version;
  } catch {
    // the package's exports hide package.json: walk up from its entry point
    try {
      const main = require.resolve(name);
      const at = main.lastIndexOf(`/node_modules/${name}/`);
      const root = main.slice(0, at + `/node_modules/${name}/`.length);
      return (JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { version: string })
        .version;
    } catch {
      return 'unknown';
    }
  }
}
