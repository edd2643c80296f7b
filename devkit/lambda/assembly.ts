import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CloudAssembly } from 'aws-cdk-lib/cx-api';
import type { CfnResource, StackScope } from './intrinsics.js';

/**
 * A cloud assembly `cdk synth` wrote (`cdk.out`), read as the deployment would use it: its stacks'
 * templates, and every `AWS::Lambda::Function` with the asset folder that would be uploaded for it
 * (the `aws:asset:path` metadata CDK writes beside each function).
 */
export interface DeployedFunction {
  /** The construct path below the stack: `place-order`, `migrate`, `BrokerSetupProvider/framework-onEvent`. */
  id: string;
  stack: StackScope;
  logicalId: string;
  resource: CfnResource;
  /** The asset folder (absolute): what would be zipped and uploaded; undefined for inline code. */
  assetDir: string | undefined;
  /** `index.handler`. */
  handler: string;
  /** `nodejs24.x`. */
  runtime: string;
  /** Lambda's defaults when the template leaves them out: 3 s, 128 MB. */
  timeoutSeconds: number;
  memorySize: number;
  /** The template's `Environment.Variables`, unresolved (literals and intrinsic functions). */
  environment: Record<string, unknown>;
}

export interface TemplateResource {
  stack: StackScope;
  logicalId: string;
  resource: CfnResource;
}

export class DeployedAssembly {
  readonly stacks: StackScope[];
  readonly functions: DeployedFunction[];

  constructor(readonly dir: string) {
    const assembly = new CloudAssembly(dir);
    this.stacks = assembly.stacks.map((s) => ({
      stackName: s.stackName,
      template: s.template as StackScope['template'],
    }));
    this.functions = this.resources('AWS::Lambda::Function').map(
      ({ stack, logicalId, resource }) => {
        const metadata = resource.Metadata ?? {};
        const cdkPath = String(metadata['aws:cdk:path'] ?? logicalId);
        const assetPath = metadata['aws:asset:path'] as string | undefined;
        const p = resource.Properties ?? {};
        const env = (p.Environment as { Variables?: Record<string, unknown> } | undefined)
          ?.Variables;
        return {
          id: cdkPath
            .split('/')
            .slice(1)
            .filter((part) => part !== 'Resource')
            .join('/'),
          stack,
          logicalId,
          resource,
          assetDir: assetPath ? join(dir, assetPath) : undefined,
          handler: String(p.Handler ?? ''),
          runtime: String(p.Runtime ?? ''),
          timeoutSeconds: Number(p.Timeout ?? 3),
          memorySize: Number(p.MemorySize ?? 128),
          environment: env ?? {},
        };
      },
    );
  }

  /** Every resource of a type, in every stack. */
  resources(type: string): TemplateResource[] {
    return this.stacks.flatMap((stack) =>
      Object.entries(stack.template.Resources ?? {})
        .filter(([, r]) => r.Type === type)
        .map(([logicalId, resource]) => ({ stack, logicalId, resource })),
    );
  }

  /** The function whose construct id is `id` (`place-order`); throws listing the known ones. */
  function(id: string): DeployedFunction {
    const found = this.functions.find((f) => f.id === id);
    if (!found) {
      throw new Error(
        `no function ${id} in ${this.dir} (has: ${this.functions.map((f) => f.id).join(', ')})`,
      );
    }
    return found;
  }

  /** The function a template value names (`{Ref: id}` or `{Fn::GetAtt: [id, 'Arn']}`) in `stack`. */
  functionNamedBy(stack: StackScope, value: unknown): DeployedFunction | undefined {
    const id = targetOf(value);
    return this.functions.find((f) => f.stack === stack && f.logicalId === id);
  }
}

/** The logical id a template value names: `{Ref: id}` or `{Fn::GetAtt: [id, …]}`. */
export function targetOf(value: unknown): string | undefined {
  const v = value as { Ref?: string; 'Fn::GetAtt'?: [string, string] } | undefined;
  return v?.Ref ?? v?.['Fn::GetAtt']?.[0];
}

/** Reads a cloud assembly folder (`manifest.json` inside). */
export function readAssembly(dir: string): DeployedAssembly {
  if (!existsSync(join(dir, 'manifest.json'))) {
    throw new Error(`${dir} is not a cloud assembly (no manifest.json): run cdk synth`);
  }
  return new DeployedAssembly(dir);
}
