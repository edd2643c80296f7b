import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../infra/paths.js';
import { CONSUMER_PEERS, pgTransactionalOutboxRelay } from '../../peers/index.js';

/** Every npm package a peer is made of, as the lab and the benchmarks install them. */
const PEER_PACKAGES = [
  ...new Set([
    ...CONSUMER_PEERS.flatMap((p) => p.packages),
    ...pgTransactionalOutboxRelay.packages,
  ]),
].filter(
  // packages our own functions use too (the AWS SDK, amqplib, pg, Powertools' batch)
  (p) => !['@aws-sdk/client-sqs', 'amqplib', 'pg', '@aws-lambda-powertools/batch'].includes(p),
);

describe('peer libraries stay out of the Lambda bundles', () => {
  it('names the peer-only packages it looks for', () => {
    expect(PEER_PACKAGES).toEqual(
      expect.arrayContaining([
        'sqs-consumer',
        '@message-queue-toolkit/sqs',
        '@message-queue-toolkit/amqp',
        'pg-transactional-outbox',
        '@aws-lambda-powertools/idempotency',
      ]),
    );
  });

  it('no function bundle takes an input from peers/ or from a peer-only package', async () => {
    const names = (await readdir(join(ROOT, 'functions'), { withFileTypes: true }))
      .filter((d) => d.isDirectory() && d.name !== 'commons')
      .map((d) => d.name);
    expect(names.length).toBeGreaterThan(3);
    for (const name of names) {
      // the settings of infra/constructs/NodeFunction.ts (unminified: only the inputs matter)
      const result = await build({
        entryPoints: [join(ROOT, 'functions', name, 'index.ts')],
        write: false,
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node24',
        mainFields: ['module', 'main'],
        external: ['@aws-sdk/*'],
        metafile: true,
        logLevel: 'error',
        outfile: join(ROOT, 'node_modules', '.cache', 'rm-test', name, 'index.mjs'),
      });
      const inputs = Object.keys(result.metafile.inputs);
      const offending = inputs.filter(
        (i) =>
          /(^|\/)peers\//.test(i) || PEER_PACKAGES.some((p) => i.includes(`node_modules/${p}/`)),
      );
      expect(offending, `functions/${name}`).toEqual([]);
    }
  });
});
