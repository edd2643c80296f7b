/** A line of a benchmark's progress, on stderr (stdout carries the results). */
export const progress = (line: string) => process.stderr.write(`${line}\n`);
