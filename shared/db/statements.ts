/**
 * Splits an SQL script into statements at `;`, outside quotes, comments and dollar-quoted bodies.
 * The RDS Data API runs one statement per call, so migrations are sent statement by statement.
 */
export function splitStatements(script: string): string[] {
  const out: string[] = [];
  let current = '';
  let i = 0;
  while (i < script.length) {
    const c = script[i] as string;
    const next = script[i + 1];
    if (c === '-' && next === '-') {
      const end = script.indexOf('\n', i);
      const stop = end < 0 ? script.length : end;
      current += script.slice(i, stop);
      i = stop;
      continue;
    }
    if (c === '/' && next === '*') {
      const end = script.indexOf('*/', i + 2);
      const stop = end < 0 ? script.length : end + 2;
      current += script.slice(i, stop);
      i = stop;
      continue;
    }
    if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < script.length) {
        if (script[j] === c && script[j + 1] === c)
          j += 2; // escaped quote
        else if (script[j] === c) break;
        else j++;
      }
      current += script.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    if (c === '$') {
      const tag = /^\$[A-Za-z_]*\$/.exec(script.slice(i))?.[0];
      if (tag) {
        const end = script.indexOf(tag, i + tag.length);
        const stop = end < 0 ? script.length : end + tag.length;
        current += script.slice(i, stop);
        i = stop;
        continue;
      }
    }
    if (c === ';') {
      out.push(current);
      current = '';
      i++;
      continue;
    }
    current += c;
    i++;
  }
  out.push(current);
  // drop empty pieces and comment-only pieces
  return out
    .map((s) => s.trim())
    .filter((s) => s.replace(/--[^\n]*|\/\*[\s\S]*?\*\//g, '').trim() !== '');
}

/**
 * Applies `fn` to the parts of `sql` outside quoted strings and identifiers, leaving those as they
 * are (parameter placeholders are rewritten this way by the Data API adapter and its endpoint).
 */
export function mapOutsideQuotes(sql: string, fn: (code: string) => string): string {
  let out = '';
  let code = '';
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i] as string;
    if (c === "'" || c === '"') {
      const end = sql.indexOf(c, i + 1);
      const stop = end < 0 ? sql.length : end;
      out += fn(code) + sql.slice(i, stop + 1);
      code = '';
      i = stop;
      continue;
    }
    code += c;
  }
  return out + fn(code);
}
