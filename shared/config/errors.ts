/** A setting that cannot work: thrown at load, its message naming the variable(s). */
export class ConfigError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ConfigError';
  }
}
