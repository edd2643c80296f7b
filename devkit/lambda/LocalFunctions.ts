import type { DeployedAssembly, DeployedFunction } from './assembly.js';
import { UnresolvedReferenceError } from './intrinsics.js';
import { LambdaFunction, type LambdaRuntimeOptions } from './LambdaFunction.js';
import type { Resolve } from './localReferences.js';

/**
 * The functions of an assembly, each run from its deployed bundle once first used, with its
 * environment from the template: references resolved to the local stand-ins, then the isolation
 * overrides (values that replace what the template sets, applied to variables a function has).
 */
export class LocalFunctions {
  private readonly functions = new Map<string, LambdaFunction>();
  /** Environment variables replaced for isolation, per function. */
  readonly overridden = new Map<string, string[]>();

  constructor(
    private readonly assembly: DeployedAssembly,
    private readonly resolve: Resolve,
    /** How the functions run (read when a function is first used: the endpoints are known then). */
    private readonly runtime: () => LambdaRuntimeOptions,
    private readonly overrides?: Record<string, string>,
  ) {}

  /** The function `id` (`place-order`) run from its bundle (created on first use). */
  fn(id: string): LambdaFunction {
    const running = this.functions.get(id);
    if (running) return running;
    const deployed = this.assembly.function(id);
    if (!deployed.assetDir) throw new Error(`${id} has no asset folder (inline code)`);
    const options = this.runtime();
    const taskRoot = LambdaFunction.taskRootOf(options.workDir, id);
    const f = new LambdaFunction(
      {
        name: id,
        assetDir: deployed.assetDir,
        handler: deployed.handler,
        runtime: deployed.runtime,
        timeoutSeconds: deployed.timeoutSeconds,
        memorySize: deployed.memorySize,
        environment: this.environmentOf(deployed, taskRoot),
      },
      options,
    );
    this.functions.set(id, f);
    return f;
  }

  /**
   * A function's environment: the template's variables, references resolved to the local stand-ins,
   * paths under /var/task mapped to the task root copy (where Lambda would have put the code),
   * then the isolation overrides.
   */
  environmentOf(fn: DeployedFunction, taskRoot: string): Record<string, string> {
    const env: Record<string, string> = {};
    const overridden: string[] = [];
    for (const [name, raw] of Object.entries(fn.environment)) {
      let text = this.variable(fn, name, raw);
      if (text === '/var/task' || text.startsWith('/var/task/')) {
        text = taskRoot + text.slice('/var/task'.length);
      }
      const override = this.overrides?.[name];
      if (override !== undefined && override !== text) {
        text = override;
        overridden.push(name);
      }
      env[name] = text;
    }
    this.overridden.set(fn.id, overridden);
    return env;
  }

  /** Which variables were replaced for isolation, per function. */
  describe(): string {
    const lines = [...this.overridden]
      .filter(([, v]) => v.length)
      .map(([k, v]) => `${k}: ${v.join(', ')}`);
    return lines.length ? `isolation overrides: ${lines.join('; ')}` : 'no environment overrides';
  }

  async stop(): Promise<void> {
    await Promise.all([...this.functions.values()].map((f) => f.stop()));
  }

  /** A variable's value resolved locally, as text (never a list or a map). */
  private variable(fn: DeployedFunction, name: string, raw: unknown): string {
    let value: unknown;
    try {
      value = this.resolve(fn.stack, raw, `${fn.id}: Environment.Variables.${name}`);
    } catch (err) {
      if (err instanceof UnresolvedReferenceError) throw err;
      throw new Error(`${fn.id}: ${name}: ${(err as Error).message}`);
    }
    if (typeof value === 'object' && value !== null) {
      throw new Error(`${fn.id}: ${name} resolves to a ${Array.isArray(value) ? 'list' : 'map'}`);
    }
    return String(value);
  }
}
