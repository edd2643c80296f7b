import pkg from '../../package.json' with { type: 'json' };

/**
 * The running code's version (the example's functions and tools), recorded as who parked in
 * parked messages' diagnoses.
 */
export const CODE_VERSION: string = pkg.version;
