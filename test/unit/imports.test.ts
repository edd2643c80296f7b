import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The layering rules, checked on the imports themselves (every `.ts` file git tracks):
 * - `shared/` is what a Lambda bundle may import: it imports nothing outside `shared/`, no
 *   devDependency (type-only imports are erased and allowed), and never `node:child_process`
 *   (but for the conformance kit's consumer process, `shared/testing/conformance/process.ts`,
 *   which no Lambda bundle reaches);
 * - inside `shared/`, imports run down the layers only (below): a layer imports nothing above it
 *   nor beside it, so there is no circle between folders; the port imports only the envelope;
 * - outside a backend's folder (`shared/transport/<backend>/`) and `test/`, only that backend's
 *   `index.ts` (its module and public surface) and `constants.ts` (its pinned names, no I/O, so
 *   that the constructs and the tooling can read them without loading the backend's client)
 *   are imported; the tests of a backend's parts (`test/`) import its other files directly;
 * - the package's entry points (`exports`, `bin` and the build's roots) reach none of the example's
 *   use cases or event schemas;
 * - the example (its folders of `shared/`, `functions/`, and `infra/` but for `infra/constructs/`)
 *   imports the library (the rest of `shared/`, and `infra/constructs/`) only through the
 *   package's entry points (the sources of `exports`): it uses nothing a user of the package
 *   could not import;
 * - the tests (`test/`) import through the package's entry points whatever an entry point exports
 *   (the same declaration, not a namesake): past the entry points, they import from the library
 *   only what no entry point exports (a white-box test of an internal, such as `splitStatements`);
 * - no stack (`infra/stacks/`) imports another: what two stacks share is in `infra/constructs/`
 *   (the library's) or `infra/pipeline/` (the example's);
 * - the package's CDK entry (`infra/constructs/index.ts`) reaches only `infra/constructs/` and
 *   `shared/`, never what finds this repository's files (`infra/paths.ts`), its settings
 *   (`infra/config.ts`) or a stack: it runs from the package's `dist/`;
 * - tooling is shared through `devkit/`: tests import `lab/` or `soak/` only in the tests of the
 *   lab and the soak; `lab/`, `soak/`, `bench/`, `bin/`, `devkit/` never import `test/`; `devkit/`
 *   imports none of the programs built on it.
 */
const ROOT = join(import.meta.dirname, '..', '..');
/** The one file of `shared/` that starts processes: the conformance kit's consumer process. */
const SPAWNS = 'shared/testing/conformance/process.ts';
const BACKENDS = ['rabbitmq', 'sqs', 'memory', 'nats'];

/**
 * The layers of `shared/`, lowest first. A file imports only from its own group (folder, or the
 * backend's folder) or from a group of a lower layer.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['util', 'logger.ts'],
  ['config'],
  ['envelope'],
  ['port'],
  ['db'],
  ['consumer'],
  ['transport/module.ts'],
  BACKENDS.map((b) => `transport/${b}`),
  ['transport/index.ts', 'outbox'],
  // the library's entry points: they never export the example's use cases
  ['index.ts', 'testing'],
  // the example: its HTTP errors and middleware, its streams and subscriptions, then its use cases
  ['http'],
  ['middleware'],
  ['pipeline'],
  ['orders', 'inventory', 'maintenance'],
  // the library's core entry point: it re-exports from the layers below
  ['index.ts'],
];

/** The group of a file of `shared/` (`config`, `transport/sqs`, `logger.ts`, …). */
function groupOf(path: string): string {
  const [, first, second] = path.split('/');
  return first === 'transport' ? `transport/${second}` : (first as string);
}

const layerOf = (group: string) => LAYERS.findIndex((l) => l.includes(group));

/** The example's folders of `shared/`: its use cases, event schemas, HTTP layer and pipeline. */
const EXAMPLE_SHARED = /^shared\/(orders|inventory|maintenance|http|middleware|pipeline)\//;
/** The example: those, its functions and its CDK app (all of `infra/` but the constructs). */
const isExample = (path: string) =>
  EXAMPLE_SHARED.test(path) ||
  (/^(functions|infra)\//.test(path) && !path.startsWith('infra/constructs/'));
/** The library: the rest of `shared/`, and the constructs. */
const isLibrary = (path: string) =>
  /^(shared|infra\/constructs)\/.*\.ts$/.test(path) && !isExample(path);
const TESTS_OF_LAB_AND_SOAK =
  /^test\/((integration|infra)\/lab\.[^/]+\.test\.ts|unit\/lab\.[^/]+\.test\.ts|integration\/soak\.smoke\.test\.ts|unit\/soakVerify\.test\.ts|helpers\/lab\.ts)$/;

interface Import {
  file: string;
  /** A repository path (relative imports resolved) or a package name. */
  target: string;
  typeOnly: boolean;
  line: number;
  /** The names it takes from the target (`default`, `*` for a namespace or the whole module). */
  names: string[];
}

function trackedFiles(): string[] {
  return execFileSync('git', ['ls-files', '*.ts'], { cwd: ROOT, encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
}

const IMPORT_RE =
  /(?:^|\n)\s*(import|export)\s+(type\s+)?(?:([^'";]*?)\s+from\s+)?['"]([^'"]+)['"]|(?:\{([^}]*)\}\s*=\s*(?:await\s+)?)?import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** A relative specifier as a repository path: `../c.js` from `shared/a/b.ts` is `shared/c.ts`. */
const resolved = (file: string, spec: string) =>
  spec.startsWith('.') ? normalize(join(dirname(file), spec)).replace(/\.js$/, '.ts') : spec;

/** The names of an import or export list (`a, type b, c as d`): what each takes, and as what. */
function listOf(list: string): { name: string; as: string }[] {
  return list
    .replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*/g, '')
    .split(',')
    .map((s) => s.trim().replace(/^type\s+/, ''))
    .filter(Boolean)
    .map((s) => {
      const [name, as] = s.split(/\s+as\s+/) as [string, string | undefined];
      return { name, as: as ?? name };
    });
}

/** The names an import clause takes (`x, { a, b as c }` → `default`, `a`, `b`; `* as ns` → `*`). */
function clauseNames(clause: string): string[] {
  const braces = /\{([^}]*)\}/.exec(clause);
  const rest = clause
    .replace(/\{[^}]*\}/, '')
    .replace(/,/g, ' ')
    .trim();
  return [
    ...(rest.startsWith('*') ? ['*'] : rest ? ['default'] : []),
    ...(braces ? listOf(braces[1] as string).map((n) => n.name) : []),
  ];
}

function importsOf(file: string, source: string): Import[] {
  const out: Import[] = [];
  for (const m of source.matchAll(IMPORT_RE)) {
    const spec = m[4] ?? m[6];
    if (!spec) continue;
    // `export { … } from` without a source is not an import; `export const` does not match.
    const line = source.slice(0, m.index).split('\n').length + (m[0].startsWith('\n') ? 1 : 0);
    const names =
      m[4] !== undefined
        ? m[3] === undefined
          ? [] // `import './x.js'`: for its effects
          : clauseNames(m[3])
        : m[5] === undefined
          ? ['*'] // `await import(…)`: the whole module
          : m[5]
              .split(',')
              .map((s) => (s.split(':')[0] as string).trim())
              .filter(Boolean);
    out.push({ file, target: resolved(file, spec), typeOnly: Boolean(m[2]), line, names });
  }
  return out;
}

const packageName = (spec: string) =>
  spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] as string);

const all = trackedFiles().flatMap((file) =>
  importsOf(file, readFileSync(join(ROOT, file), 'utf8')),
);

interface PackageJson {
  exports: Record<string, string | { default: string }>;
  bin?: Record<string, string>;
  devDependencies: Record<string, string>;
}
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson;
/** The source file of a built path: `./dist/shared/index.js` → `shared/index.ts`. */
const source = (built: string) => built.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts');
/** The sources of the package's `exports` (its public entry points). */
const EXPORTED = new Set(
  Object.values(pkg.exports).flatMap((t) => (typeof t === 'string' ? [] : [source(t.default)])),
);

/**
 * The names each entry point exports, by its source: read from its committed API report
 * (`api/<entry>.api.md`, `index` for `.`), which the API report's own test keeps equal to the code.
 */
const REPORTED = new Map(
  Object.entries(pkg.exports).flatMap(([subpath, t]) => {
    if (typeof t === 'string') return [];
    const report = `${subpath === '.' ? 'index' : subpath.slice(2)}.api.md`;
    return [[source(t.default), reportNames(readFileSync(join(ROOT, 'api', report), 'utf8'))]];
  }),
);

/** The names an API report exports: its `export <declaration> <name>`, and its `export { … }`. */
function reportNames(report: string): string[] {
  const declared =
    /^export\s+(?:declare\s+)?(?:abstract\s+)?(?:function|const\s+enum|enum|const|let|var|class|interface|type|namespace)\s+([\w$]+)|^export\s+\{([^}]*)\}/gm;
  return [...report.matchAll(declared)].flatMap((m) =>
    m[1] ? [m[1]] : listOf(m[2] as string).map((n) => n.as),
  );
}

const sources = new Map<string, string | undefined>();
const sourceOf = (file: string): string | undefined => {
  if (!sources.has(file)) {
    const path = join(ROOT, file);
    sources.set(file, existsSync(path) ? readFileSync(path, 'utf8') : undefined);
  }
  return sources.get(file);
};
/** A declaration at the top of a module, exported (`export` captured) or not, and its name. */
const DECLARATION =
  /^(export\s+)?(?:declare\s+)?(?:async\s+)?(?:abstract\s+)?(?:function\*?|const\s+enum|enum|const|let|var|class|interface|type|namespace)\s+([\w$]+)/gm;
/** An import or export list, and the module it is from (none for a module's own `export { … }`). */
const LIST = /^(import|export)\s+(?:type\s+)?\{([^}]*)\}(?:\s*from\s*['"]([^'"]+)['"])?/gm;
const STAR = /^export\s+(?:type\s+)?\*\s+from\s+['"]([^'"]+)['"]/gm;

/**
 * Where the export `name` of a module is declared (`shared/port/types.ts#Outcome`, or a package's
 * `pkg#Name`), following the re-exports; undefined when the reader cannot tell.
 */
function originOf(file: string, name: string, seen = new Set<string>()): string | undefined {
  const key = `${file}#${name}`;
  if (!file.endsWith('.ts')) return key;
  const src = sourceOf(file);
  if (src === undefined || seen.has(key)) return undefined;
  seen.add(key);
  const declarations = [...src.matchAll(DECLARATION)];
  if (declarations.some((m) => m[1] && m[2] === name)) return key;
  const lists = [...src.matchAll(LIST)];
  for (const [, kind, list, from] of lists) {
    const hit = kind === 'export' ? listOf(list as string).find((n) => n.as === name) : undefined;
    if (!hit) continue;
    if (from) return originOf(resolved(file, from), hit.name, seen);
    // `export { x }`: of a declaration of the module, or of what it imports
    if (declarations.some((m) => m[2] === hit.name)) return `${file}#${hit.name}`;
    for (const [, k, l, f] of lists) {
      const imported = k === 'import' && f && listOf(l as string).find((n) => n.as === hit.name);
      if (imported) return originOf(resolved(file, f as string), imported.name, seen);
    }
    return undefined;
  }
  for (const [, from] of src.matchAll(STAR)) {
    const origin = originOf(resolved(file, from as string), name, seen);
    if (origin) return origin;
  }
  return undefined;
}

/** The declarations the entry points export (by origin), and the names the reader did not trace. */
const PUBLIC = new Set<string>();
const PUBLIC_NAMES = new Set<string>();
const UNREAD: string[] = [];
for (const [entry, names] of REPORTED) {
  for (const name of names) {
    const origin = originOf(entry, name);
    PUBLIC_NAMES.add(name);
    if (origin) PUBLIC.add(origin);
    else UNREAD.push(`${entry}#${name}`);
  }
}

/**
 * The names a test takes from the library past its entry points that an entry point exports: the
 * same declaration (the name alone when the reader cannot tell where it is declared).
 */
const publicPastTheEntryPoints = (imports: readonly Import[]) =>
  imports.flatMap((i) => {
    if (top(i.file) !== 'test' || !isLibrary(i.target) || EXPORTED.has(i.target)) return [];
    const names = i.names.filter((n) => {
      const origin = originOf(i.target, n);
      return origin ? PUBLIC.has(origin) : PUBLIC_NAMES.has(n);
    });
    return names.length > 0 ? [`${i.file}:${i.line} → ${i.target}: ${names.join(', ')}`] : [];
  });

/** Imports of a file of the example that reach into the library past its entry points. */
const pastTheEntryPoints = (imports: readonly Import[]) =>
  imports.filter((i) => isExample(i.file) && isLibrary(i.target) && !EXPORTED.has(i.target));
const show = (list: Import[]) => list.map((i) => `${i.file}:${i.line} → ${i.target}`);
const top = (path: string) => path.split('/')[0] as string;

describe('the import rules', () => {
  it('finds the imports it checks (the reader works)', () => {
    expect(
      importsOf('shared/a/b.ts', "import { x } from '../c.js';\nexport * from './d.js';"),
    ).toEqual([
      { file: 'shared/a/b.ts', target: 'shared/c.ts', typeOnly: false, line: 1, names: ['x'] },
      { file: 'shared/a/b.ts', target: 'shared/a/d.ts', typeOnly: false, line: 2, names: ['*'] },
    ]);
    expect(
      importsOf(
        'x.ts',
        [
          "import y, { type A, b as c } from 'y';",
          "import * as z from 'z';",
          "import './w.js';",
          "const { p, q: r } = await import('./v.js');",
        ].join('\n'),
      ).map((i) => i.names),
    ).toEqual([['default', 'A', 'b'], ['*'], [], ['p', 'q']]);
    expect(importsOf('x.ts', "import type { T } from 'aws-lambda';")[0]?.typeOnly).toBe(true);
    expect(importsOf('x.ts', "const m = await import('fauxqs');")[0]?.target).toBe('fauxqs');
    expect(all.length).toBeGreaterThan(500);
  });

  it('shared/ imports nothing outside shared/, no devDependency and no node:child_process', () => {
    const dev = new Set(Object.keys(pkg.devDependencies));
    const bad = all.filter((i) => {
      if (!i.file.startsWith('shared/')) return false;
      if (i.target.includes('/') && !i.target.startsWith('@') && i.target.endsWith('.ts')) {
        return !i.target.startsWith('shared/');
      }
      if (i.target === 'node:child_process' || i.target === 'child_process')
        return i.file !== SPAWNS;
      return !i.typeOnly && dev.has(packageName(i.target));
    });
    expect(show(bad)).toEqual([]);
  });

  it('inside shared/, imports run down the layers, and the port imports only the envelope', () => {
    const inShared = all.filter(
      (i) =>
        i.file.startsWith('shared/') && i.target.startsWith('shared/') && i.target.endsWith('.ts'),
    );
    const unknown = [...new Set(inShared.flatMap((i) => [i.file, i.target]).map(groupOf))].filter(
      (g) => layerOf(g) < 0,
    );
    expect(unknown).toEqual([]);
    const upward = inShared.filter((i) => {
      const from = groupOf(i.file);
      const to = groupOf(i.target);
      return from !== to && layerOf(to) >= layerOf(from);
    });
    expect(show(upward)).toEqual([]);
    const port = inShared.filter(
      (i) => groupOf(i.file) === 'port' && !['port', 'envelope'].includes(groupOf(i.target)),
    );
    expect(show(port)).toEqual([]);
  });

  it("outside a backend's folder and test/, only its index.ts and constants.ts are imported", () => {
    const bad = all.filter((i) =>
      BACKENDS.some((b) => {
        const folder = `shared/transport/${b}/`;
        return (
          i.target.startsWith(folder) &&
          !i.file.startsWith(folder) &&
          top(i.file) !== 'test' &&
          i.target !== `${folder}index.ts` &&
          i.target !== `${folder}constants.ts`
        );
      }),
    );
    expect(show(bad)).toEqual([]);
  });

  it("the package's entry points reach none of the example's use cases or event schemas", () => {
    const build = JSON.parse(readFileSync(join(ROOT, 'tsconfig.build.json'), 'utf8')) as {
      files: string[];
    };
    const entries = [
      ...new Set([...EXPORTED, ...Object.values(pkg.bin ?? {}).map(source), ...build.files]),
    ];
    const byFile = new Map<string, Import[]>();
    for (const i of all) byFile.set(i.file, [...(byFile.get(i.file) ?? []), i]);
    const reached = new Set<string>();
    const path: Map<string, string> = new Map();
    const queue = [...entries];
    for (const e of entries) path.set(e, e);
    while (queue.length > 0) {
      const file = queue.pop() as string;
      if (reached.has(file)) continue;
      reached.add(file);
      for (const i of byFile.get(file) ?? []) {
        if (!i.target.startsWith('shared/') || reached.has(i.target)) continue;
        path.set(i.target, `${path.get(file)} → ${i.target}`);
        queue.push(i.target);
      }
    }
    expect(entries.length).toBeGreaterThan(5);
    expect(reached.size).toBeGreaterThan(50);
    expect([...reached].filter((f) => EXAMPLE_SHARED.test(f)).map((f) => path.get(f))).toEqual([]);
  });

  it("the example imports the library only through the package's entry points", () => {
    // the rule: a module past the entry points is caught; an entry point or the example's own is not
    const probe = importsOf(
      'functions/x/index.ts',
      [
        "import { createLogger } from '../../shared/logger.js';",
        "import { OutboxStore } from '../../shared/index.js';",
        "import { sqsModule } from '../../shared/transport/sqs/index.js';",
        "import { EVENT_TYPES } from '../../shared/pipeline/constants.js';",
      ].join('\n'),
    );
    expect(show(pastTheEntryPoints(probe))).toEqual(['functions/x/index.ts:1 → shared/logger.ts']);
    expect(
      pastTheEntryPoints(
        importsOf(
          'infra/stacks/X.ts',
          "import { NodeFunction } from '../constructs/NodeFunction.js';",
        ),
      ),
    ).toHaveLength(1);
    expect(EXPORTED).toContain('shared/index.ts');
    expect(EXPORTED).toContain('infra/constructs/index.ts');
    // the rule sees the example's imports of the library (its entry points, then)
    expect(all.filter((i) => isExample(i.file) && isLibrary(i.target)).length).toBeGreaterThan(30);
    expect(show(pastTheEntryPoints(all))).toEqual([]);
  });

  it('the tests import through the entry points everything the entry points export', () => {
    // the reports are read: every entry point has one, each of its names is found in the code
    expect([...REPORTED.keys()].sort()).toEqual([...EXPORTED].sort());
    expect(REPORTED.get('shared/index.ts')).toContain('OutboxStore');
    expect(REPORTED.get('shared/index.ts')).not.toContain('splitStatements');
    expect(reportNames('export function f(): void;\nexport { Logger_2 as Logger }\n')).toEqual([
      'f',
      'Logger',
    ]);
    expect(UNREAD).toEqual([]);
    expect(PUBLIC.size).toBeGreaterThan(250);
    expect(originOf('shared/index.ts', 'RetryOutcome')).toBe('shared/port/types.ts#RetryOutcome');
    // the rule: a public declaration past the entry points is caught; an internal one (even a
    // namesake of a public one), an entry point, or the example's own is not
    // (from a file at the top of test/: this file's text is read too, and from here these paths
    // reach no library file)
    const probe = importsOf(
      'test/x.test.ts',
      [
        "import { OutboxStore, REPUBLISH_PREFIX } from '../shared/outbox/OutboxStore.js';",
        "import type { Outcome } from '../shared/port/types.js';",
        "import type { RetryOutcome } from '../shared/consumer/retryPolicy.js';",
        "import { splitStatements } from '../shared/db/statements.js';",
        "import { OutboxStore as Store } from '../shared/index.js';",
        "import { HttpError } from '../shared/http/errors.js';",
        "import { NodeFunction } from '../infra/constructs/NodeFunction.js';",
        "const { toSqsRecord: record } = await import('../shared/transport/sqs/record.js');",
      ].join('\n'),
    );
    expect(publicPastTheEntryPoints(probe)).toEqual([
      'test/x.test.ts:1 → shared/outbox/OutboxStore.ts: OutboxStore',
      'test/x.test.ts:2 → shared/port/types.ts: Outcome',
      'test/x.test.ts:7 → infra/constructs/NodeFunction.ts: NodeFunction',
      'test/x.test.ts:8 → shared/transport/sqs/record.ts: toSqsRecord',
    ]);
    // the rule sees the tests' imports of the library's internals (the white-box tests', then)
    expect(
      all.filter((i) => top(i.file) === 'test' && isLibrary(i.target) && !EXPORTED.has(i.target))
        .length,
    ).toBeGreaterThan(50);
    expect(publicPastTheEntryPoints(all)).toEqual([]);
  });

  it('no stack imports another stack', () => {
    const bad = all.filter(
      (i) =>
        i.file.startsWith('infra/stacks/') &&
        i.target.startsWith('infra/stacks/') &&
        i.target !== i.file,
    );
    expect(show(bad)).toEqual([]);
  });

  it("the package's CDK entry reaches only infra/constructs/ and shared/", () => {
    const reached = new Set<string>();
    const pending = ['infra/constructs/index.ts'];
    for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
      if (reached.has(file)) continue;
      reached.add(file);
      for (const i of all) {
        if (i.file === file && i.target.endsWith('.ts') && !i.target.startsWith('@')) {
          pending.push(i.target);
        }
      }
    }
    expect(reached.size).toBeGreaterThan(10);
    const outside = [...reached].filter(
      (f) => !f.startsWith('infra/constructs/') && !f.startsWith('shared/'),
    );
    expect(outside).toEqual([]);
  });

  it('tests import lab/ or soak/ only in the tests of the lab and the soak', () => {
    const bad = all.filter(
      (i) =>
        i.file.startsWith('test/') &&
        ['lab', 'soak'].includes(top(i.target)) &&
        i.target.endsWith('.ts') &&
        !TESTS_OF_LAB_AND_SOAK.test(i.file),
    );
    expect(show(bad)).toEqual([]);
  });

  it('no program imports test/, and devkit/ imports none of the programs built on it', () => {
    const bad = all.filter((i) => {
      if (!i.target.endsWith('.ts') || i.target.startsWith('@')) return false;
      const from = top(i.file);
      const to = top(i.target);
      if (['lab', 'soak', 'bench', 'bin', 'devkit', 'functions', 'infra'].includes(from)) {
        if (to === 'test') return true;
      }
      return from === 'devkit' && ['lab', 'soak', 'bench', 'bin'].includes(to);
    });
    expect(show(bad)).toEqual([]);
  });

  it('reads relative paths from the repository root', () => {
    expect(relative(ROOT, join(ROOT, 'shared'))).toBe('shared');
  });
});
