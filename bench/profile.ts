import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * `tsx bench/profile.ts <dir>`: summarizes the V8 CPU profiles that `npm run bench -- --profile
 * <dir>` wrote (one per role process): self time by package (or our code) and the top functions.
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function owner(url: string): string {
  if (!url) return '(native / idle / gc)';
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1] as string;
  if (url.startsWith('node:')) return 'node core';
  return 'project code';
}

async function summarize(file: string): Promise<void> {
  const p = JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  p.samples.forEach((id, i) => {
    self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0));
  });
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const byOwner = new Map<string, number>();
  const byFunction = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id);
    if (!n) continue;
    const name = n.callFrame.functionName || '(anonymous)';
    if (name === '(idle)') continue;
    byOwner.set(owner(n.callFrame.url), (byOwner.get(owner(n.callFrame.url)) ?? 0) + us);
    const key = `${name} ${n.callFrame.url.replace(/.*node_modules\//, '')}:${n.callFrame.lineNumber + 1}`;
    byFunction.set(key, (byFunction.get(key) ?? 0) + us);
  }
  const busy = [...byOwner.values()].reduce((a, b) => a + b, 0);
  const pct = (us: number) => `${((us / busy) * 100).toFixed(1)}%`.padStart(6);
  console.log(
    `\n${file}: ${(total / 1e6).toFixed(1)} s profiled, ${(busy / 1e6).toFixed(1)} s on CPU (${((busy / total) * 100).toFixed(0)}%)`,
  );
  for (const [o, us] of [...byOwner].sort((a, b) => b[1] - a[1]).slice(0, 10))
    console.log(`  ${pct(us)}  ${o}`);
  console.log('  top functions (self time):');
  for (const [f, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 15))
    console.log(`  ${pct(us)}  ${f}`);
}

const dir = process.argv[2];
if (!dir) {
  console.error('usage: tsx bench/profile.ts <dir with .cpuprofile files>');
  process.exit(2);
}
const walk = async (d: string): Promise<string[]> =>
  (
    await Promise.all(
      (
        await readdir(d, { withFileTypes: true })
      ).map((e) =>
        e.isDirectory()
          ? walk(join(d, e.name))
          : Promise.resolve(e.name.endsWith('.cpuprofile') ? [join(d, e.name)] : []),
      ),
    )
  ).flat();
for (const f of (await walk(dir)).sort()) await summarize(f);
