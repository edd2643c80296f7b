import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { Command } from 'commander';
import {
  CONTRACTS_DIR,
  type ContractsDiff,
  currentContracts,
  diffContracts,
  readContracts,
} from '../devkit/contracts.js';

/**
 * `npm run contracts -- [check|update]`: keeps `contracts/` in step with `events.ts`.
 * `check` is for CI (exit 1 on any difference); `update` is the only way the files should change,
 * and it refuses breaking changes so an incompatible edit cannot be committed by regenerating.
 */
const dir = relative(process.cwd(), CONTRACTS_DIR) || '.';

function diff(): ContractsDiff {
  return diffContracts(readContracts(), currentContracts());
}

function printBreaking(breaking: string[]): void {
  console.error(`breaking changes against ${dir}/:`);
  for (const line of breaking) console.error(`  - ${line}`);
  console.error(
    'An incompatible change needs a new event type or a new major version in events.ts, ' +
      `never an edit of a committed contract (see ${dir}/README.md).`,
  );
}

const program = new Command('contracts').description(
  'compare the event data schemas with the committed JSON Schemas in contracts/',
);

program
  .command('check', { isDefault: true })
  .description('exit 1 on breaking changes or missing/outdated files (default)')
  .action(() => {
    const { added, changed, breaking } = diff();
    if (breaking.length > 0) printBreaking(breaking);
    const stale = [...added, ...changed];
    if (stale.length > 0) {
      console.error(`not up to date in ${dir}/: ${stale.join(', ')}`);
      if (breaking.length === 0) console.error('run `npm run contracts -- update`');
    }
    if (breaking.length > 0 || stale.length > 0) {
      process.exitCode = 1;
    } else {
      console.log(`${dir}/: up to date and compatible`);
    }
  });

program
  .command('update')
  .description('write the current schemas; refuses (writes nothing) if any change is breaking')
  .action(() => {
    const { added, changed, breaking } = diff();
    if (breaking.length > 0) {
      printBreaking(breaking);
      console.error('nothing written');
      process.exitCode = 1;
      return;
    }
    const current = currentContracts();
    const files = [...added, ...changed];
    mkdirSync(CONTRACTS_DIR, { recursive: true });
    for (const file of files) {
      writeFileSync(join(CONTRACTS_DIR, file), `${JSON.stringify(current[file], null, 2)}\n`);
    }
    formatWithBiome(files.map((f) => join(CONTRACTS_DIR, f)));
    for (const file of added) console.log(`added   ${dir}/${file}`);
    for (const file of changed) console.log(`updated ${dir}/${file}`);
    if (files.length === 0) console.log(`${dir}/: already up to date`);
  });

/**
 * Formats the written files the way `npm run lint` expects, so an update never fails the lint.
 * Only cosmetic: files are compared as JSON values, so if Biome cannot run they are still correct.
 */
function formatWithBiome(paths: string[]): void {
  if (paths.length === 0) return;
  try {
    const biome = createRequire(import.meta.url).resolve('@biomejs/biome/bin/biome');
    execFileSync(process.execPath, [biome, 'format', '--write', ...paths], { stdio: 'ignore' });
  } catch (err) {
    console.warn(`could not format with Biome (${String(err)}); run \`npm run format\``);
  }
}

await program.parseAsync();
