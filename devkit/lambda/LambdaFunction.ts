import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createWriteStream, type WriteStream } from 'node:fs';
import { chmod, cp, mkdir, readdir } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { closeServer, listen, readBody } from '../emulators/httpApi.js';
import { node24 } from './runtimeDir.js';

const BOOTSTRAP = join(dirname(fileURLToPath(import.meta.url)), 'bootstrap.mjs');

/**
 * Every environment process still running: killed when this process exits, so that none is left
 * behind (frozen ones included: SIGKILL ends a stopped process).
 */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** A function as its template configures it, with its environment resolved to local values. */
export interface LambdaFunctionSpec {
  /** The function's name (here: its construct id, `place-order`). */
  name: string;
  /** The asset folder `cdk synth` wrote: copied as the task root, read-only. */
  assetDir: string;
  handler: string;
  runtime: string;
  timeoutSeconds: number;
  memorySize: number;
  /** `Environment.Variables`, every value a string. */
  environment: Record<string, string>;
}

export interface LambdaRuntimeOptions {
  /** Where the task roots, temporary folders and log files go. */
  workDir: string;
  /** The folder standing in for /var/runtime: its `node_modules` is on NODE_PATH (the SDK only). */
  runtimeDir: string;
  /** What the platform adds to every environment: credentials, service endpoints. */
  platformEnv: Record<string, string>;
  region: string;
  accountId: string;
  /** Every line a function writes (stdout and stderr), e.g. to pick journal lines out of its logs. */
  onLog?: (functionName: string, line: string) => void;
}

/** The error payload Lambda returns for a failed invocation. */
export interface LambdaError {
  errorType: string;
  errorMessage: string;
  stackTrace?: string[];
}

export type InvokeOutcome = {
  requestId: string;
  /** A new execution environment was started (and initialized) for this invocation. */
  coldStart: boolean;
  /** Initialization (spawn to the runtime's first `next`), cold starts only. */
  initMs?: number;
  /** From handing the event to the runtime to its response. */
  durationMs: number;
} & ({ ok: true; payload: unknown } | { ok: false; error: LambdaError });

/** An invocation that returned a function error (`FunctionError: Unhandled`). */
export class LambdaFunctionError extends Error {
  constructor(
    readonly functionName: string,
    readonly error: LambdaError,
  ) {
    super(`${functionName}: ${error.errorType}: ${error.errorMessage}`);
    this.name = 'LambdaFunctionError';
  }
}

/** Lambda's init phase limit (Lambda DG, "Lambda execution environment lifecycle"). */
const INIT_LIMIT_MS = 10_000;
const LOG_TAIL = 40;

/**
 * One function run the way Lambda runs it, from its deployed bundle: each execution environment
 * is a fresh Node.js 24 process started on the runtime's bootstrap (`bootstrap.mjs`) in a copy of
 * the asset folder, with exactly the function's environment plus what the platform defines (no
 * variable of this process leaks in), serving one invocation at a time through the Lambda
 * Runtime API. Environments are reused while warm and frozen in between; an invocation that
 * outlives the function's timeout fails with `Sandbox.Timedout` and its environment is killed,
 * so the next one starts cold, as after a timeout in AWS.
 */
export class LambdaFunction {
  /** Invocations, cold starts, errors, timeouts, and the most invocations ever in flight at once. */
  readonly stats = {
    invocations: 0,
    coldStarts: 0,
    errors: 0,
    timeouts: 0,
    peakConcurrency: 0,
    /** Σ of the invocations' durations rounded up to 1 ms, as Lambda bills them. */
    billedMs: 0,
  };
  private inFlight = 0;
  private readonly idle: Environment[] = [];
  private readonly all = new Set<Environment>();
  private taskRoot: Promise<string> | undefined;
  private log: WriteStream | undefined;
  private stopped = false;

  constructor(
    readonly spec: LambdaFunctionSpec,
    private readonly options: LambdaRuntimeOptions,
  ) {}

  /** Where the task root of function `name` is copied to (`<workDir>/functions/<name>/var/task`). */
  static taskRootOf(workDir: string, name: string): string {
    return join(workDir, 'functions', safe(name), 'var', 'task');
  }

  /** The log file every environment of this function writes to (stdout and stderr). */
  get logFile(): string {
    return join(this.options.workDir, `${safe(this.spec.name)}.log`);
  }

  /** Invokes the function (RequestResponse): the payload it returned, or its error. */
  async invoke(event: unknown): Promise<InvokeOutcome> {
    if (this.stopped) throw new Error(`${this.spec.name}: stopped`);
    this.stats.invocations++;
    let env = this.idle.pop();
    while (env && !env.alive) env = this.idle.pop();
    const coldStart = !env;
    if (!env) {
      const taskRoot = await this.prepareTaskRoot();
      this.log ??= createWriteStream(this.logFile, { flags: 'a' });
      env = new Environment(this, taskRoot, this.options, this.log);
      this.all.add(env);
      this.stats.coldStarts++;
    }
    this.inFlight++;
    this.stats.peakConcurrency = Math.max(this.stats.peakConcurrency, this.inFlight);
    const outcome = await env.invoke(event, coldStart).finally(() => {
      this.inFlight--;
    });
    this.stats.billedMs += Math.ceil(outcome.durationMs);
    if (!outcome.ok) {
      this.stats.errors++;
      if (outcome.error.errorType === 'Sandbox.Timedout') this.stats.timeouts++;
    }
    if (env.alive && !this.stopped) this.idle.push(env);
    else this.all.delete(env);
    return outcome;
  }

  /** Invokes and returns the payload; a function error throws `LambdaFunctionError`. */
  async invokeOrThrow<T = unknown>(event: unknown): Promise<T> {
    const outcome = await this.invoke(event);
    if (!outcome.ok) throw new LambdaFunctionError(this.spec.name, outcome.error);
    return outcome.payload as T;
  }

  /** Stops every environment (invocations in flight fail). */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.all].map((e) => e.kill()));
    this.all.clear();
    this.idle.length = 0;
    await new Promise<void>((resolve) => (this.log ? this.log.end(resolve) : resolve()));
  }

  /** The asset folder copied once as the function's task root (/var/task: read-only). */
  private prepareTaskRoot(): Promise<string> {
    this.taskRoot ??= (async () => {
      const root = LambdaFunction.taskRootOf(this.options.workDir, this.spec.name);
      await mkdir(dirname(root), { recursive: true });
      await cp(this.spec.assetDir, root, { recursive: true });
      await readOnly(root);
      return root;
    })();
    return this.taskRoot;
  }
}

const safe = (name: string) => name.replace(/[^A-Za-z0-9._-]+/g, '_');

async function readOnly(dir: string): Promise<void> {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) await readOnly(p);
    else await chmod(p, 0o444);
  }
  await chmod(dir, 0o555);
}

/** Makes a task root writable again so that it can be removed. */
export async function writable(dir: string): Promise<void> {
  await chmod(dir, 0o755).catch(() => {});
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = join(dir, e.name);
    if (e.isDirectory()) await writable(p);
    else await chmod(p, 0o644).catch(() => {});
  }
}

interface Pending {
  requestId: string;
  event: unknown;
  deadline: number;
  resolve: (outcome: InvokeOutcome) => void;
  coldStart: boolean;
  initMs?: number;
  handedAt?: number;
  timer?: NodeJS.Timeout;
}

/** One execution environment: a process and the Runtime API endpoint it polls. */
class Environment {
  alive = true;
  private readonly server: Server;
  private readonly listening: Promise<number>;
  private child: ChildProcess | undefined;
  private waitingNext: ServerResponse | undefined;
  private pending: Pending | undefined;
  private frozen = false;
  private initialized = false;
  private initError: LambdaError | undefined;
  private readonly startedAt = Date.now();
  private initTimer: NodeJS.Timeout | undefined;
  private readonly tail: string[] = [];
  private readonly name: string;

  constructor(
    private readonly fn: LambdaFunction,
    private readonly taskRoot: string,
    private readonly options: LambdaRuntimeOptions,
    private readonly log: WriteStream,
  ) {
    this.name = fn.spec.name;
    this.server = createServer((req, res) => void this.route(req, res));
    this.server.keepAliveTimeout = 0;
    this.listening = listen(this.server).then((address) => address.port);
  }

  async invoke(event: unknown, coldStart: boolean): Promise<InvokeOutcome> {
    const requestId = randomUUID();
    const timeoutMs = this.fn.spec.timeoutSeconds * 1000;
    return new Promise<InvokeOutcome>((resolve) => {
      if (!this.alive) {
        resolve({
          requestId,
          coldStart,
          durationMs: 0,
          ok: false,
          error: { errorType: 'Runtime.ExitError', errorMessage: 'the environment has exited' },
        });
        return;
      }
      this.pending = { requestId, event, deadline: 0, resolve, coldStart };
      if (coldStart) void this.start();
      else this.deliver();
      // the init phase has its own limit; the invocation's timeout starts when the event is handed over
      if (coldStart) {
        this.initTimer = setTimeout(
          () =>
            this.finish({
              errorType: 'Sandbox.Timedout',
              errorMessage: `RequestId: ${requestId} Error: the init phase did not finish within ${INIT_LIMIT_MS / 1000 + this.fn.spec.timeoutSeconds} s`,
            }),
          INIT_LIMIT_MS + timeoutMs,
        );
      }
    });
  }

  /** Hands the pending event to a runtime waiting on `next` (thawing it first). */
  private deliver(): void {
    const p = this.pending;
    const res = this.waitingNext;
    if (!p || !res || p.handedAt !== undefined) return;
    this.waitingNext = undefined;
    if (this.frozen) this.thaw();
    clearTimeout(this.initTimer);
    p.handedAt = Date.now();
    p.deadline = p.handedAt + this.fn.spec.timeoutSeconds * 1000;
    p.timer = setTimeout(
      () =>
        this.finish({
          errorType: 'Sandbox.Timedout',
          errorMessage: `RequestId: ${p.requestId} Error: Task timed out after ${this.fn.spec.timeoutSeconds.toFixed(2)} seconds`,
        }),
      p.deadline - p.handedAt,
    );
    res.writeHead(200, {
      'content-type': 'application/json',
      'lambda-runtime-aws-request-id': p.requestId,
      'lambda-runtime-deadline-ms': String(p.deadline),
      'lambda-runtime-invoked-function-arn': `arn:aws:lambda:${this.options.region}:${this.options.accountId}:function:${this.name}`,
      'lambda-runtime-trace-id': `Root=1-${Math.floor(Date.now() / 1000).toString(16)}-${randomUUID().replace(/-/g, '').slice(0, 24)};Sampled=0`,
    });
    res.end(JSON.stringify(p.event));
  }

  /** Ends the pending invocation: with its payload, or with an error (then the environment dies). */
  private finish(error: LambdaError | undefined, payload?: unknown): void {
    const p = this.pending;
    if (!p) return;
    this.pending = undefined;
    clearTimeout(p.timer);
    clearTimeout(this.initTimer);
    const base = {
      requestId: p.requestId,
      coldStart: p.coldStart,
      ...(p.initMs !== undefined ? { initMs: p.initMs } : {}),
      durationMs: p.handedAt !== undefined ? Date.now() - p.handedAt : 0,
    };
    if (
      error &&
      (error.errorType === 'Sandbox.Timedout' || error.errorType.startsWith('Runtime.'))
    ) {
      // a timed-out, crashed or failed-to-initialize environment is not used again
      this.alive = false;
      void this.kill();
    }
    p.resolve(error ? { ...base, ok: false, error } : { ...base, ok: true, payload });
  }

  private async start(): Promise<void> {
    const port = await this.listening;
    const spec = this.fn.spec;
    const tmp = join(dirname(dirname(this.taskRoot)), `tmp-${randomUUID().slice(0, 8)}`);
    await mkdir(tmp, { recursive: true });
    const nodeModules = join(this.options.runtimeDir, 'node_modules');
    // Lambda DG, "Defined runtime environment variables"; the function's own cannot override them
    const env: Record<string, string> = {
      ...spec.environment,
      ...this.options.platformEnv,
      _HANDLER: spec.handler,
      AWS_REGION: this.options.region,
      AWS_DEFAULT_REGION: this.options.region,
      AWS_EXECUTION_ENV: `AWS_Lambda_${spec.runtime}`,
      AWS_LAMBDA_FUNCTION_NAME: spec.name,
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(spec.memorySize),
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
      AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${spec.name}`,
      AWS_LAMBDA_LOG_STREAM_NAME: `local/[$LATEST]${randomUUID().replace(/-/g, '')}`,
      AWS_LAMBDA_RUNTIME_API: `127.0.0.1:${port}`,
      LAMBDA_TASK_ROOT: this.taskRoot,
      LAMBDA_RUNTIME_DIR: this.options.runtimeDir,
      // the nodejs24.x bootstrap's NODE_PATH, with the runner's stand-ins for /opt and /var/runtime
      NODE_PATH: [nodeModules, this.options.runtimeDir, this.taskRoot].join(':'),
      TZ: ':UTC',
      LANG: 'en_US.UTF-8',
      PATH: `${dirname(node24())}:/usr/local/bin:/usr/bin:/bin`,
      TMPDIR: tmp,
    };
    const child = spawn(node24(), [BOOTSTRAP], {
      cwd: this.taskRoot,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    running.add(child);
    child.once('exit', () => running.delete(child));
    for (const stream of [child.stdout, child.stderr]) {
      stream.on('data', (chunk: Buffer) => this.log.write(chunk));
      createInterface({ input: stream }).on('line', (line) => this.line(line));
    }
    child.once('error', (err) => this.exited(`spawn failed: ${err.message}`));
    child.once('exit', (code, signal) =>
      this.exited(signal ? `signal ${signal}` : `exit status ${code}`),
    );
  }

  private line(line: string): void {
    this.tail.push(line);
    if (this.tail.length > LOG_TAIL) this.tail.shift();
    this.options.onLog?.(this.name, line);
  }

  private exited(how: string): void {
    if (!this.alive) return;
    this.alive = false;
    void closeServer(this.server);
    const p = this.pending;
    if (!p) return;
    if (!this.initialized) {
      this.finish(
        this.initError ?? {
          errorType: 'Runtime.ExitError',
          errorMessage: `RequestId: ${p.requestId} Error: Runtime exited during init with ${how}\n${this.tail.slice(-10).join('\n')}`,
        },
      );
    } else {
      this.finish({
        errorType: 'Runtime.ExitError',
        errorMessage: `RequestId: ${p.requestId} Error: Runtime exited with error: ${how}`,
      });
    }
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '';
    const body = (await readBody(req, Number.POSITIVE_INFINITY)).toString('utf8');
    if (req.method === 'GET' && url.endsWith('/runtime/invocation/next')) {
      if (!this.initialized) {
        this.initialized = true;
        if (this.pending) this.pending.initMs = Date.now() - this.startedAt;
      }
      this.waitingNext = res;
      if (this.pending && this.pending.handedAt === undefined) this.deliver();
      else this.freeze();
      return;
    }
    const m = /\/runtime\/invocation\/([^/]+)\/(response|error)$/.exec(url);
    if (req.method === 'POST' && m) {
      res.writeHead(202).end('{"status":"OK"}');
      if (this.pending?.requestId !== m[1]) return; // a late answer to an invocation already ended
      if (m[2] === 'response') this.finish(undefined, body.length ? JSON.parse(body) : null);
      else this.finish(parseError(body, 'Unhandled'));
      return;
    }
    if (req.method === 'POST' && url.endsWith('/runtime/init/error')) {
      res.writeHead(202).end('{"status":"OK"}');
      this.initError = parseError(body, 'Runtime.Unknown');
      return;
    }
    res.writeHead(404).end();
  }

  private freeze(): void {
    if (this.frozen || !this.child?.pid) return;
    this.frozen = this.child.kill('SIGSTOP');
  }

  private thaw(): void {
    if (!this.frozen) return;
    this.frozen = false;
    this.child?.kill('SIGCONT');
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGKILL');
      await gone;
    }
    this.alive = false;
    void closeServer(this.server);
  }
}

function parseError(body: string, fallbackType: string): LambdaError {
  try {
    const e = JSON.parse(body) as Partial<LambdaError>;
    return {
      errorType: e.errorType ?? fallbackType,
      errorMessage: e.errorMessage ?? '',
      ...(e.stackTrace ? { stackTrace: e.stackTrace } : {}),
    };
  } catch {
    return { errorType: fallbackType, errorMessage: body };
  }
}
