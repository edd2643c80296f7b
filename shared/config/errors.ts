import type { FaultPoint } from './faults.js';

/** A setting that cannot work: thrown at load, its message naming the variable(s). */
export class ConfigError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ConfigError';
  }
}

/** Thrown at an armed fault point whose action is `throw` (`FAULTS`). */
export class InjectedFaultError extends Error {
  readonly point: FaultPoint;
  constructor(point: FaultPoint) {
    super(`injected fault at ${point}`);
    this.name = 'InjectedFaultError';
    this.point = point;
  }
}
