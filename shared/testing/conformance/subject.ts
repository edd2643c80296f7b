import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ConformanceSubject } from './types.js';

/** A subject module that cannot be used, with what is wrong. */
export class SubjectError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SubjectError';
  }
}

/** Checks that `value` has the subject's shape; throws `SubjectError` naming what is missing. */
export function checkSubject(value: unknown, where: string): ConformanceSubject {
  const s = value as Partial<Record<keyof ConformanceSubject, unknown>> | undefined;
  if (typeof s !== 'object' || s === null) {
    throw new SubjectError(
      `${where}: exports no subject (a \`default\` or \`conformance\` export)`,
    );
  }
  const problems: string[] = [];
  if (typeof s.consumer !== 'string' || s.consumer === '') problems.push('consumer (a name)');
  for (const fn of ['migrations', 'handler', 'event', 'effects'] as const) {
    if (typeof s[fn] !== 'function') problems.push(`${fn}() (a function)`);
  }
  if (s.outboxes !== undefined && !Array.isArray(s.outboxes)) {
    problems.push('outboxes (a list of table names, or left out)');
  }
  if (problems.length > 0) {
    throw new SubjectError(`${where}: the subject lacks ${problems.join(', ')}`);
  }
  return value as ConformanceSubject;
}

/** The absolute path of a module path given on the command line or in options. */
export const modulePath = (path: string) => (isAbsolute(path) ? path : resolve(path));

/** Imports a subject module (its `default` export, else `conformance`) and checks it. */
export async function loadSubject(path: string): Promise<ConformanceSubject> {
  const file = modulePath(path);
  let mod: { default?: unknown; conformance?: unknown };
  try {
    mod = (await import(pathToFileURL(file).href)) as typeof mod;
  } catch (err) {
    throw new SubjectError(`cannot import ${file}: ${(err as Error).message}`, { cause: err });
  }
  return checkSubject(mod.default ?? mod.conformance, file);
}
