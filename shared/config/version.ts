import pkg from '../../package.json' with { type: 'json' };

/** The running code's version, recorded in parked messages' diagnoses. */
export const CODE_VERSION: string = pkg.version;
