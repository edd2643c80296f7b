import { readFileSync } from 'node:fs';
import type { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { RUNBOOK, RUNBOOK_DOC, runbookAnchor } from '../../infra/constructs/runbook.js';
import { synthPipelines } from '../helpers/templates.js';

/**
 * Every alarm's description points at its section of the runbook (docs/operations.md), which
 * exists and shows the command the description names: an alarm added without its runbook entry
 * fails the synth, one without its section fails here.
 */
const doc = readFileSync(RUNBOOK_DOC, 'utf8');

/** The `### …` sections under `## Alarms`: heading → text. */
function alarmSections(markdown: string): Map<string, string> {
  const alarms = markdown.slice(markdown.indexOf('\n## Alarms\n'));
  const end = alarms.indexOf('\n## ', 1);
  const body = end > 0 ? alarms.slice(0, end) : alarms;
  const sections = new Map<string, string>();
  for (const part of body.split('\n### ').slice(1)) {
    const [heading = '', ...rest] = part.split('\n');
    sections.set(heading.trim(), rest.join('\n'));
  }
  return sections;
}

/** A description as text: a token (a function or log group name) becomes `<token>`. */
function text(description: unknown): string {
  if (typeof description === 'string') return description;
  const join = (description as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  if (!join) return '<token>';
  return join[1].map((p) => (typeof p === 'string' ? p : '<token>')).join(join[0]);
}

let t: ReturnType<typeof synthPipelines>;
beforeAll(() => {
  t = synthPipelines();
});

describe('the runbook: one section per alarm, named by it', () => {
  const sections = alarmSections(doc);

  it('every runbook entry has its section, showing the entry’s command; every section an entry', () => {
    for (const [name, entry] of Object.entries(RUNBOOK)) {
      const section = sections.get(name);
      expect(section, `${RUNBOOK_DOC}: no section "### ${name}"`).toBeDefined();
      expect(section, `${name}: the command`).toContain(entry.command);
    }
    expect([...sections.keys()].sort()).toEqual(Object.keys(RUNBOOK).sort());
  });

  it('every alarm of both stacks names what to check, its command and its section', () => {
    const anchors = new Set([...sections.keys()].map(runbookAnchor));
    for (const [name, template] of [
      ['sqs', t.sqs],
      ['rabbitmq', t.rabbit],
    ] as [string, Template][]) {
      const alarms = Object.entries(template.findResources('AWS::CloudWatch::Alarm'));
      expect(alarms.length, name).toBeGreaterThan(10);
      for (const [logicalId, resource] of alarms) {
        const description = text(resource.Properties.AlarmDescription);
        const link = new RegExp(`Runbook: ${RUNBOOK_DOC.replace('.', '\\.')}#([a-z0-9]+)$`).exec(
          description,
        );
        expect(link, `${name} ${logicalId}: ${description}`).not.toBeNull();
        const anchor = link?.[1] as string;
        expect(anchors.has(anchor), `${name} ${logicalId}: #${anchor}`).toBe(true);
        // the section is the alarm's: its id (`Alarms<id><hash>`) begins with the section's name
        expect(
          logicalId
            .replace(/^Alarms/, '')
            .toLowerCase()
            .startsWith(anchor),
          logicalId,
        ).toBe(true);
        expect(description, logicalId).toMatch(/ Check .+: `.+`\. Runbook: /);
        expect(description.length, logicalId).toBeLessThanOrEqual(1024);
        // the stack's own name in the CLI commands, not a placeholder
        expect(description, logicalId).not.toContain('<stack>');
      }
    }
  });
});
