/**
 * Evaluates the CloudFormation values a synthesized template gives a function (environment
 * variables, event source settings, custom resource properties): literals as they are, intrinsic
 * functions (`Ref`, `Fn::GetAtt`, `Fn::Join`, `Fn::Select`, `Fn::Sub`, `Fn::ImportValue`) against
 * local stand-ins for the resources they name. A reference nothing local stands in for fails with
 * the path of the value, never silently.
 */

/** A template as `cdk synth` writes it (only what is read here). */
export interface CfnTemplate {
  Resources?: Record<string, CfnResource>;
  Outputs?: Record<string, { Value: unknown; Export?: { Name: unknown } }>;
}

export interface CfnResource {
  Type: string;
  Properties?: Record<string, unknown>;
  Metadata?: Record<string, unknown>;
}

/** The stack a value belongs to: its template, and its name for pseudo parameters. */
export interface StackScope {
  stackName: string;
  template: CfnTemplate;
}

/** Local values for what a template references. */
export interface LocalReferences {
  /** `AWS::Region`, `AWS::AccountId`, `AWS::Partition`, `AWS::URLSuffix` (`AWS::StackName` is the scope's). */
  pseudo: Record<string, string>;
  /** The `Ref` of resource `logicalId` of type `resource.Type`; undefined when nothing stands in. */
  ref(stack: StackScope, logicalId: string, resource: CfnResource): string | undefined;
  /** `Fn::GetAtt` of resource `logicalId`; undefined when nothing stands in. */
  getAtt(
    stack: StackScope,
    logicalId: string,
    attribute: string,
    resource: CfnResource,
  ): string | string[] | undefined;
  /** The stacks `Fn::ImportValue` looks the export up in. */
  stacks: readonly StackScope[];
}

export class UnresolvedReferenceError extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(`${path}: ${message}`);
    this.name = 'UnresolvedReferenceError';
  }
}

type Value = string | number | boolean | null | Value[] | { [k: string]: Value };

const one = (o: Record<string, unknown>) => {
  const keys = Object.keys(o);
  return keys.length === 1 ? (keys[0] as string) : undefined;
};

/** The value with every intrinsic function evaluated (throws `UnresolvedReferenceError`). */
export function resolveValue(
  value: unknown,
  stack: StackScope,
  refs: LocalReferences,
  path = 'value',
): Value {
  if (value === null || typeof value !== 'object') return value as Value;
  if (Array.isArray(value))
    return value.map((v, i) => resolveValue(v, stack, refs, `${path}[${i}]`));
  const obj = value as Record<string, unknown>;
  const fn = one(obj);
  const arg = fn ? obj[fn] : undefined;
  switch (fn) {
    case 'Ref':
      return ref(String(arg), stack, refs, path);
    case 'Fn::GetAtt': {
      const [id, attribute] = Array.isArray(arg)
        ? (arg as string[])
        : String(arg).split(/\.(.*)/s, 2);
      const resource = stack.template.Resources?.[id as string];
      if (!resource)
        throw new UnresolvedReferenceError(path, `no resource ${id} in ${stack.stackName}`);
      const v = refs.getAtt(stack, id as string, attribute as string, resource);
      if (v === undefined) {
        throw new UnresolvedReferenceError(
          path,
          `nothing local stands in for ${id}.${attribute} (${resource.Type})`,
        );
      }
      return v;
    }
    case 'Fn::Join': {
      const [separator, list] = arg as [string, unknown];
      const items = resolveValue(list, stack, refs, `${path}.Fn::Join`);
      if (!Array.isArray(items)) throw new UnresolvedReferenceError(path, 'Fn::Join of a non-list');
      return items.map(String).join(separator);
    }
    case 'Fn::Select': {
      const [index, list] = arg as [unknown, unknown];
      const items = resolveValue(list, stack, refs, `${path}.Fn::Select`);
      const i = Number(resolveValue(index, stack, refs, `${path}.Fn::Select`));
      if (!Array.isArray(items) || items[i] === undefined) {
        throw new UnresolvedReferenceError(path, `Fn::Select ${i} out of range`);
      }
      return items[i] as Value;
    }
    case 'Fn::Split': {
      const [separator, source] = arg as [string, unknown];
      return String(resolveValue(source, stack, refs, `${path}.Fn::Split`)).split(separator);
    }
    case 'Fn::Sub': {
      const [text, vars] = Array.isArray(arg)
        ? (arg as [string, Record<string, unknown>])
        : [String(arg), {}];
      return text.replace(/\$\{([^}!][^}]*)\}/g, (_m, name: string) => {
        if (name in vars) return String(resolveValue(vars[name], stack, refs, `${path}.${name}`));
        const [id, attribute] = name.split(/\.(.*)/s, 2);
        if (attribute) {
          return String(resolveValue({ 'Fn::GetAtt': [id, attribute] }, stack, refs, path));
        }
        return ref(name, stack, refs, path);
      });
    }
    case 'Fn::ImportValue': {
      const name = resolveValue(arg, stack, refs, `${path}.Fn::ImportValue`);
      for (const s of refs.stacks) {
        for (const output of Object.values(s.template.Outputs ?? {})) {
          if (output.Export && resolveValue(output.Export.Name, s, refs, path) === name) {
            return resolveValue(output.Value, s, refs, `${path} (export ${name})`);
          }
        }
      }
      throw new UnresolvedReferenceError(path, `no stack exports ${String(name)}`);
    }
    default:
      if (fn?.startsWith('Fn::'))
        throw new UnresolvedReferenceError(path, `${fn} is not supported`);
      return Object.fromEntries(
        Object.entries(obj).map(([k, v]) => [k, resolveValue(v, stack, refs, `${path}.${k}`)]),
      );
  }
}

function ref(name: string, stack: StackScope, refs: LocalReferences, path: string): string {
  if (name === 'AWS::StackName') return stack.stackName;
  if (name.startsWith('AWS::')) {
    const v = refs.pseudo[name];
    if (v === undefined) throw new UnresolvedReferenceError(path, `no local value for ${name}`);
    return v;
  }
  const resource = stack.template.Resources?.[name];
  if (!resource)
    throw new UnresolvedReferenceError(path, `no resource ${name} in ${stack.stackName}`);
  const v = refs.ref(stack, name, resource);
  if (v === undefined) {
    throw new UnresolvedReferenceError(
      path,
      `nothing local stands in for Ref ${name} (${resource.Type})`,
    );
  }
  return v;
}
