import { type Command, Option } from 'commander';

/** One command-line option: its flags and description, its default and its choices if any. */
type OptionSpec = readonly [
  flags: string,
  description: string,
  defaultValue?: string,
  choices?: readonly string[],
];

/** The name commander stores an option's value under: `--batch-size <n>` → `batchSize`. */
type Name<F extends string> = F extends `--${infer N} ${string}` ? Camel<N> : Camel<F>;
type Camel<S extends string> = S extends `--${infer N}`
  ? Camel<N>
  : S extends `${infer H}-${infer T}`
    ? `${H}${Capitalize<Camel<T>>}`
    : S;

/**
 * The parsed values: one of the choices, or a string, where a default is given; else a string or
 * undefined for an option with a value, a boolean or undefined for a flag.
 */
type Values<S extends readonly OptionSpec[]> = {
  [E in S[number] as Name<E[0]>]: E extends readonly [string, string, string, readonly (infer C)[]]
    ? C
    : E extends readonly [string, string, string]
      ? string
      : E[0] extends `${string}<${string}`
        ? string | undefined
        : boolean | undefined;
};

/** Adds the options to `program` in order, parses the command line and returns the values. */
export function parseOptions<const S extends readonly OptionSpec[]>(
  program: Command,
  specs: S,
): Values<S> {
  for (const [flags, description, defaultValue, choices] of specs) {
    const option = new Option(flags, description);
    if (choices) option.choices(choices);
    program.addOption(defaultValue === undefined ? option : option.default(defaultValue));
  }
  return program.parse().opts<Values<S>>();
}
