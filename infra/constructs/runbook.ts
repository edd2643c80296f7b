/**
 * What an alarm's description tells whoever it wakes: what to check, the command that shows it,
 * and the section of the runbook (docs/operations.md) that says the rest. One entry per alarm id,
 * or for the alarms of one kind per queue (`NearBound<queue>`, `RouteMissing<queue>`) one per
 * kind; the runbook has a section of the same name. A command may name `<stack>`, `<transport>`,
 * `<function>`, `<log group>`, `<queue>` and `<broker>`, filled in per alarm. A new alarm needs an
 * entry here and a section there: synthesis fails without the first, test/infra/runbook.test.ts
 * without the second.
 */
export interface RunbookEntry {
  /** What to look at (after "Check"). */
  check: string;
  /** The command that shows it, as the runbook writes it. */
  command: string;
}

export const RUNBOOK_DOC = 'docs/operations.md';

const RELAY_DRAIN = 'npm run cli -- relay drain --stack <stack>';
const OUTBOX_STATUS = 'npm run cli -- outbox status --stack <stack>';
const PARKED_LIST = 'npm run cli -- parked list --transport <transport> --stack <stack>';
const FUNCTION_ERRORS = 'aws logs tail <log group> --since 30m --filter-pattern ERROR';
const EVENT_SOURCE = 'aws lambda list-event-source-mappings --function-name <function>';

const heartbeat: RunbookEntry = {
  check: 'that the relay starts (a run prints its summary or its error), then its throttles',
  command: RELAY_DRAIN,
};
const roundErrors: RunbookEntry = {
  check: 'that the database answers, then the relay log’s "relay round failed" lines',
  command: OUTBOX_STATUS,
};
const backlog: RunbookEntry = { check: 'the backlog and whether it falls', command: OUTBOX_STATUS };
const oldest: RunbookEntry = {
  check: 'the oldest row’s age and last error, then whether the relay runs',
  command: OUTBOX_STATUS,
};
const attention: RunbookEntry = {
  check: 'the rows and their reasons (fix the cause, then `outbox retry`)',
  command: OUTBOX_STATUS,
};
const parked: RunbookEntry = { check: 'the parked messages’ diagnosis', command: PARKED_LIST };
const consumer: RunbookEntry = {
  check: 'that the consumer’s event source is enabled, then its errors and throttles',
  command: EVENT_SOURCE,
};
const resultsGivenBack: RunbookEntry = {
  check: 'why order-results gave them back (its database?), then redrive them',
  command: FUNCTION_ERRORS,
};

export const RUNBOOK = {
  RelayHeartbeat: heartbeat,
  InventoryRelayHeartbeat: heartbeat,
  RelayRoundErrors: roundErrors,
  InventoryRelayRoundErrors: roundErrors,
  OutboxBacklog: backlog,
  InventoryOutboxBacklog: backlog,
  OutboxOldestUnpublished: oldest,
  InventoryOutboxOldestUnpublished: oldest,
  OutboxNeedsAttention: attention,
  InventoryOutboxNeedsAttention: attention,
  RelayErrors: { check: 'what a run of the relay reports', command: RELAY_DRAIN },
  ReserveErrors: { check: 'the consumer’s errors', command: FUNCTION_ERRORS },
  OrderResultsErrors: { check: 'the results consumer’s errors', command: FUNCTION_ERRORS },
  MaintenanceErrors: {
    check: 'what a run of it reports',
    command: 'npm run cli -- maintenance run --stack <stack>',
  },
  ParkedMessages: parked,
  NewParkedMessages: parked,
  ConsumerBacklog: consumer,
  OldestMessageAge: consumer,
  ResultsParkedMessages: resultsGivenBack,
  ResultsOldestMessageAge: consumer,
  ResultsBacklog: consumer,
  ResultsParkingOldestMessageAge: resultsGivenBack,
  ResultsParkingBacklog: resultsGivenBack,
  ParkRefused: {
    check:
      'the parking route or queue (RabbitMQ: the binding inventory.orders.dlx → inventory.orders.parking and the parking depth against its bound; SQS: the parking queue and the consumer’s permission to send to it), then the consumer log’s "parking refused a message" lines',
    command: PARKED_LIST,
  },
  HeldForDeadLettering: {
    check:
      'the binding inventory.orders.dlx → inventory.orders.parking; once it is back RabbitMQ parks the held messages within 180 s',
    command: PARKED_LIST,
  },
  QueueMetricsUnavailable: {
    check: 'the broker’s state, then the relay log’s "queue metrics unavailable" lines',
    command: 'aws mq describe-broker --broker-id <broker> --query BrokerState',
  },
  NearBound: {
    check: 'the queue’s depth over the last hour and what drains it',
    command:
      'aws cloudwatch get-metric-statistics --namespace ReliableMessaging --metric-name QueueReady --dimensions Name=Queue,Value=<queue> Name=service,Value=outbox-relay --statistics Maximum --period 300 --start-time "$(date -u -d -1hour +%FT%TZ)" --end-time "$(date -u +%FT%TZ)"',
  },
  RouteMissing: {
    check: 'the bindings, restored by running broker-setup again',
    command:
      'aws lambda invoke --function-name <function> --cli-binary-format raw-in-base64-out --payload \'{"RequestType":"Update","ResourceProperties":{}}\' /dev/stdout',
  },
} as const satisfies Record<string, RunbookEntry>;

export type RunbookSection = keyof typeof RUNBOOK;

/**
 * The runbook section of alarm `id` of a kind: its own when the runbook has one (this pipeline's
 * alarms, e.g. `InventoryRelayHeartbeat`), else the kind's (`RelayHeartbeat`).
 */
export function runbookSection(id: string, kind: RunbookSection): string {
  return Object.hasOwn(RUNBOOK, id) ? id : kind;
}

/** The anchor of a runbook section (its heading, as Markdown renderers make it). */
export function runbookAnchor(section: string): string {
  return section.toLowerCase();
}

/** Values for the placeholders of the commands (tokens allowed: they resolve at deploy). */
export type RunbookValues = Partial<
  Record<'stack' | 'transport' | 'function' | 'log group' | 'queue' | 'broker', string>
>;

/**
 * An alarm's description: what it means, then what to check with its command (placeholders
 * filled from `values`), then where the runbook says more.
 */
export function alarmDescription(meaning: string, section: string, values: RunbookValues): string {
  if (!Object.hasOwn(RUNBOOK, section)) {
    throw new Error(
      `alarm ${section}: no runbook entry (infra/constructs/runbook.ts) and section (${RUNBOOK_DOC})`,
    );
  }
  const entry: RunbookEntry = RUNBOOK[section as RunbookSection];
  const command = entry.command.replace(
    /<([a-z ]+)>/g,
    (placeholder, name: keyof RunbookValues) => values[name] ?? placeholder,
  );
  return `${meaning} Check ${entry.check}: \`${command}\`. Runbook: ${RUNBOOK_DOC}#${runbookAnchor(section)}`;
}
