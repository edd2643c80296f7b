import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The real `cdk synth` (CLI, bundling with the local esbuild) for both transports, with no AWS
 * credentials and every outbound connection refused (a proxy on a closed port): what a user gets on
 * a fresh clone. Each function bundle stays under 1 MB (the AWS SDK comes with the runtime).
 */
const MAX_BUNDLE_BYTES = 1024 * 1024;

function cdkSynth(transport: 'sqs' | 'rabbitmq') {
  const out = mkdtempSync(join(tmpdir(), `synth-${transport}-`));
  const home = mkdtempSync(join(tmpdir(), 'home-'));
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    AWS_EC2_METADATA_DISABLED: 'true',
    HTTPS_PROXY: 'http://127.0.0.1:9',
    HTTP_PROXY: 'http://127.0.0.1:9',
    CDK_DISABLE_VERSION_CHECK: 'true',
  };
  const started = Date.now();
  const r = spawnSync(
    join('node_modules', '.bin', 'cdk'),
    ['synth', '-q', '-c', `transport=${transport}`, '-o', out],
    { env, encoding: 'utf8', timeout: 180_000 },
  );
  return { ...r, out, ms: Date.now() - started };
}

describe.each(['sqs', 'rabbitmq'] as const)('cdk synth -c transport=%s', (transport) => {
  it('synthesizes offline without credentials; every function bundle ≤ 1 MB', () => {
    const r = cdkSynth(transport);
    expect(r.status, r.stderr).toBe(0);
    const templates = readdirSync(r.out).filter((f) => f.endsWith('.template.json'));
    expect(templates.sort()).toEqual(
      [
        'ReliableMessagingData.template.json',
        transport === 'sqs'
          ? 'ReliableMessagingSqs.template.json'
          : 'ReliableMessagingRabbitMq.template.json',
      ].sort(),
    );
    const bundles = readdirSync(r.out)
      .filter((d) => d.startsWith('asset.'))
      .map((d) => join(r.out, d, 'index.mjs'))
      .filter((f) => {
        try {
          return statSync(f).isFile();
        } catch {
          return false;
        }
      });
    expect(bundles.length).toBeGreaterThanOrEqual(transport === 'sqs' ? 5 : 6);
    const sizes = bundles.map((f) => statSync(f).size);
    for (const size of sizes) expect(size).toBeLessThanOrEqual(MAX_BUNDLE_BYTES);
    const templateBytes = templates.map((t) => readFileSync(join(r.out, t)).length);
    console.info(
      `cdk synth ${transport}: ${r.ms} ms; templates ${templateBytes.join(', ')} B; bundles ${sizes.join(', ')} B`,
    );
    // ~35 s alone; the synth itself is bounded at 180 s (spawnSync), on a machine busy with other work
  }, 200_000);
});
