import { describe, expect, it } from 'vitest';
import { splitStatements } from '../../shared/db/statements.js';
import { bothServicesMigrations } from '../../shared/pipeline/schema.js';

describe('splitStatements', () => {
  it('splits at semicolons outside quotes, comments and dollar quotes', () => {
    const script = `-- a comment; with a semicolon
CREATE TABLE a (x text CHECK (x ~ '^a;b$')); /* block; comment */
INSERT INTO a VALUES ('it''s; fine');
DO $body$ BEGIN PERFORM 1; END $body$;
SELECT ";odd;" FROM a;
`;
    expect(splitStatements(script)).toEqual([
      `-- a comment; with a semicolon\nCREATE TABLE a (x text CHECK (x ~ '^a;b$'))`,
      `/* block; comment */\nINSERT INTO a VALUES ('it''s; fine')`,
      'DO $body$ BEGIN PERFORM 1; END $body$',
      'SELECT ";odd;" FROM a',
    ]);
  });

  it('every migration splits into statements with no stray semicolons', async () => {
    for (const m of await bothServicesMigrations()) {
      const statements = splitStatements(m.sql);
      expect(statements.length, m.name).toBeGreaterThan(0);
      for (const s of statements) {
        const code = s
          .replace(/\$([A-Za-z_]*)\$[\s\S]*?\$\1\$/g, '') // dollar-quoted bodies (DO blocks)
          .replace(/--[^\n]*/g, '')
          .replace(/'[^']*'/g, '');
        expect(code.includes(';'), `${m.name}: ${s.slice(0, 60)}`).toBe(false);
      }
    }
  });
});
