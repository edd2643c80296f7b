import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  LambdaFunction,
  type LambdaFunctionSpec,
  type LambdaRuntimeOptions,
  writable,
} from '../../devkit/lambda/LambdaFunction.js';
import { linkRuntimeSdk } from '../../devkit/lambda/runtimeDir.js';

/**
 * The local Lambda runtime itself, on small handlers written here (the deployed bundles' runs are
 * in bundles.sqs/rabbitmq.test.ts): a fresh Node 24 process per execution environment, only the
 * AWS SDK resolvable outside the task root, nothing of this process's environment, the timeout
 * enforced, warm environments reused and frozen between invocations.
 */
const HANDLERS: Record<string, string> = {
  sdk: `
    import { SQSClient } from '@aws-sdk/client-sqs';
    import { createRequire } from 'node:module';
    const require = createRequire(import.meta.url);
    export const handler = async () => ({
      esm: typeof SQSClient,
      cjs: typeof require('@aws-sdk/client-rds-data').RDSDataClient,
      node: process.version,
      cwd: process.cwd(),
      env: Object.keys(process.env).sort(),
      fromConfig: process.env.FROM_CONFIG,
    });`,
  notBundled: `
    import { z } from 'zod';
    export const handler = async () => z.string().parse('x');`,
  notBundledCjs: `
    import { createRequire } from 'node:module';
    const require = createRequire(import.meta.url);
    export const handler = async () => typeof require('pg');`,
  slow: `
    let ticks = 0;
    setInterval(() => { ticks++; }, 20);
    let invocations = 0;
    export const handler = async (event, context) => {
      if (event.fail) throw new TypeError('refused: ' + event.fail);
      const ticksSoFar = ticks;
      await new Promise((r) => setTimeout(r, event.ms ?? 0));
      return { pid: process.pid, invocations: ++invocations, ticks: ticksSoFar, remaining: context.getRemainingTimeInMillis(), requestId: context.awsRequestId };
    };`,
  initFails: `
    throw new RangeError('bad configuration at cold start');
    export const handler = async () => 'never';`,
};

describe('the local Lambda runtime (execution environments of a bundle)', () => {
  let work: string;
  let options: LambdaRuntimeOptions;
  const functions: LambdaFunction[] = [];

  const fn = (name: string, overrides: Partial<LambdaFunctionSpec> = {}) => {
    const f = new LambdaFunction(
      {
        name,
        assetDir: join(work, 'assets', name),
        handler: 'index.handler',
        runtime: 'nodejs24.x',
        timeoutSeconds: 3,
        memorySize: 128,
        environment: { FROM_CONFIG: 'yes' },
        ...overrides,
      },
      options,
    );
    functions.push(f);
    return f;
  };

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'rm-runtime-test-'));
    for (const [name, code] of Object.entries(HANDLERS)) {
      await mkdir(join(work, 'assets', name), { recursive: true });
      await writeFile(join(work, 'assets', name, 'index.mjs'), code);
    }
    await linkRuntimeSdk(join(work, 'runtime'));
    options = {
      workDir: work,
      runtimeDir: join(work, 'runtime'),
      platformEnv: { AWS_ACCESS_KEY_ID: 'local', AWS_SECRET_ACCESS_KEY: 'local' },
      region: 'us-east-1',
      accountId: '000000000000',
    };
  });

  afterAll(async () => {
    await Promise.all(functions.map((f) => f.stop()));
    if (work) {
      await writable(work);
      await rm(work, { recursive: true, force: true });
    }
  });

  it('loads the ESM handler from the task root on Node 24, with the AWS SDK importable and requirable', async () => {
    const out = await fn('sdk').invokeOrThrow<Record<string, unknown>>({});
    expect(out).toMatchObject({ esm: 'function', cjs: 'function', fromConfig: 'yes' });
    expect(String(out.node)).toMatch(/^v24\./);
    expect(String(out.cwd)).toMatch(/functions\/sdk\/var\/task$/);
  });

  it("gives the function its configuration and the platform's variables, none of this process's", async () => {
    process.env.LEAK_CHECK = 'must-not-leak';
    const { env } = await fn('sdk-env', { assetDir: join(work, 'assets', 'sdk') }).invokeOrThrow<{
      env: string[];
    }>({});
    delete process.env.LEAK_CHECK;
    expect(env).not.toContain('LEAK_CHECK');
    expect(env).not.toContain('DATABASE_URL');
    expect(env).toEqual(
      expect.arrayContaining([
        'FROM_CONFIG',
        '_HANDLER',
        'AWS_LAMBDA_FUNCTION_NAME',
        'AWS_LAMBDA_RUNTIME_API',
        'LAMBDA_TASK_ROOT',
        'NODE_PATH',
        'AWS_REGION',
      ]),
    );
  });

  it('resolves nothing else from outside the bundle: an unbundled package fails the init', async () => {
    for (const name of ['notBundled', 'notBundledCjs']) {
      const out = await fn(name).invoke({});
      expect(out.ok, name).toBe(false);
      if (out.ok) continue;
      if (name === 'notBundled') {
        expect(out.error.errorType).toBe('Runtime.ImportModuleError');
        expect(out.error.errorMessage).toContain("Cannot find package 'zod'");
      } else {
        expect(out.error.errorType).toBe('Error');
        expect(out.error.errorMessage).toContain("Cannot find module 'pg'");
      }
    }
  });

  it('reuses a warm environment, frozen between invocations; a handler error keeps it', async () => {
    const f = fn('slow');
    const first = await f.invoke({});
    expect(first.coldStart).toBe(true);
    const a = first.ok ? (first.payload as { pid: number }) : undefined;
    // frozen for 500 ms: the function's 20 ms interval timer does not run meanwhile (25 ticks)
    await new Promise((r) => setTimeout(r, 500));
    const second = await f.invokeOrThrow<{ pid: number; invocations: number; ticks: number }>({});
    expect(second.pid).toBe(a?.pid);
    expect(second.invocations).toBe(2);
    expect(second.ticks).toBeLessThan(10);
    const failed = await f.invoke({ fail: 'no stock' });
    expect(failed.ok).toBe(false);
    if (!failed.ok)
      expect(failed.error).toMatchObject({
        errorType: 'TypeError',
        errorMessage: 'refused: no stock',
      });
    const third = await f.invokeOrThrow<{ pid: number }>({});
    expect(third.pid).toBe(a?.pid);
  });

  it('ends an invocation at the function timeout and starts the next one cold', async () => {
    const f = fn('slow-timeout', { assetDir: join(work, 'assets', 'slow'), timeoutSeconds: 1 });
    const warm = await f.invokeOrThrow<{ pid: number; remaining: number }>({});
    expect(warm.remaining).toBeLessThanOrEqual(1000);
    const started = Date.now();
    const out = await f.invoke({ ms: 5_000 });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(out.ok).toBe(false);
    if (!out.ok) {
      expect(out.error.errorType).toBe('Sandbox.Timedout');
      expect(out.error.errorMessage).toContain('Task timed out after 1.00 seconds');
    }
    const next = await f.invoke({});
    expect(next.coldStart).toBe(true);
    expect(next.ok && (next.payload as { pid: number }).pid).not.toBe(warm.pid);
    expect(f.stats).toMatchObject({ timeouts: 1, coldStarts: 2 });
  });

  it('fails every invocation with the init error while the module cannot load', async () => {
    const f = fn('initFails');
    for (let i = 0; i < 2; i++) {
      const out = await f.invoke({});
      expect(out).toMatchObject({
        ok: false,
        coldStart: true,
        error: { errorType: 'RangeError', errorMessage: 'bad configuration at cold start' },
      });
    }
  });
});
