import type { RetryBudget } from '../config/budget.js';
import type { SqlDatabase, SqlExecutor } from '../db/types.js';
import type { Envelope } from '../envelope/envelope.js';
import type { Logger } from '../logger.js';
import type { InboundMessage, MessageHandler, Outcome } from '../port/types.js';
import { isInfrastructureError, shortError } from './classify.js';
import { type DecodeRules, decodeMessage } from './decode.js';
import { Inbox } from './inbox.js';
import type { Journal } from './journal.js';
import { RetryPolicy } from './retryPolicy.js';

export interface InboxHandlerOptions {
  db: SqlDatabase;
  /** The inbox's consumer name (unique per consumer; `processed_messages.consumer_name`). */
  consumer: string;
  /** Event types handled; any other is a permanent error (parked). */
  types: readonly string[];
  /** The data schema per event type and schema major (as `DecodeRules.schemaFor`). */
  schemaFor: DecodeRules['schemaFor'];
  budget: RetryBudget;
  /**
   * The effect of one message, in the transaction that claimed it (use `tx`, never the db).
   * Resolves to a result label for the journal (e.g. `'applied'`), or `'deferred'` when an earlier
   * event it needs has not been applied yet (its claim is undone in the same transaction and it is
   * retried, then parked as `missing_predecessor` after the budget). Throws to fail: classified
   * by `classifyError` (permanent: parked; transient or unknown: retried within the budget).
   * Appending result events to an outbox in `tx` (`OutboxStore`) is how it publishes.
   */
  apply(tx: SqlExecutor, envelope: Envelope, message: InboundMessage): Promise<string>;
  logger?: Logger;
  journal?: Journal;
  /** Clock, for age decisions (tests). */
  now?: () => number;
}

/** What `apply` resolves to for a message that cannot be applied yet. */
const DEFERRED = 'deferred';

/** What a message came to in its transaction. */
type Applied = { kind: 'duplicate' } | { kind: 'deferred' } | { kind: 'applied'; result: string };

interface Decoded {
  index: number;
  message: InboundMessage;
  envelope: Envelope;
}

/**
 * An idempotent `MessageHandler` around the user's effect (`apply`): the consumer pieces
 * (`decodeMessage`, the `Inbox`, the `RetryPolicy`) put together the way the example's use cases
 * use them, for any effect that runs in one SQL transaction.
 */
export function inboxHandler(options: InboxHandlerOptions): MessageHandler {
  const handler = new InboxHandler(options);
  return (messages) => handler.process(messages);
}

/**
 * Applies each message's effect exactly once, whatever the transport redelivers:
 * - a message is decoded first (`decodeMessage`); one that cannot be never enters a transaction;
 * - the valid messages of a batch share one transaction (one COMMIT): one statement claims them
 *   all in the inbox, then `apply` runs for each one claimed now, in order; a message the inbox
 *   already had (or met earlier in the batch) is a duplicate, acknowledged without `apply`;
 *   deferred messages have their claims undone in the same transaction;
 * - if that transaction fails, each message is processed again in a transaction of its own, so
 *   that one bad message cannot decide the others; once the database is found unreachable, the
 *   rest get the same failure without trying;
 * - failures and deferrals become `retry` or `park` outcomes through the `RetryPolicy`.
 */
export class InboxHandler {
  private readonly inbox: Inbox;
  private readonly retry: RetryPolicy;
  private readonly rules: DecodeRules;
  private readonly claimSql: string;

  constructor(private readonly options: InboxHandlerOptions) {
    this.inbox = new Inbox(options.consumer);
    this.retry = new RetryPolicy(options.budget, options.now ?? Date.now);
    this.rules = { consumer: options.consumer, types: options.types, schemaFor: options.schemaFor };
    this.claimSql = `WITH claim AS (
         ${this.inbox.claimSql(1)})
       SELECT coalesce(json_agg(message_id), '[]') AS claimed FROM claim`;
  }

  /** Returns one outcome per message, in order. */
  async process(messages: readonly InboundMessage[]): Promise<Outcome[]> {
    const outcomes: Outcome[] = new Array(messages.length);
    const valid: Decoded[] = [];
    messages.forEach((message, index) => {
      this.journal('received', message, undefined);
      try {
        valid.push({ index, message, envelope: decodeMessage(message, this.rules) });
      } catch (err) {
        outcomes[index] = this.failure(message, undefined, err);
      }
    });
    const settled = await this.inOneTransaction(valid);
    valid.forEach((d, i) => {
      outcomes[d.index] = settled[i] as Outcome;
    });
    return outcomes;
  }

  /** The outcomes of `valid`, in order: all in one transaction, else one by one. */
  private async inOneTransaction(valid: readonly Decoded[]): Promise<Outcome[]> {
    if (valid.length === 0) return [];
    let applied: Applied[];
    try {
      applied = await this.options.db.transaction((tx) => this.applyAll(tx, valid));
    } catch (err) {
      if (valid.length === 1) {
        const only = valid[0] as Decoded;
        return [this.failure(only.message, only.envelope, err)];
      }
      this.options.logger?.warn('batch transaction failed; processing its messages one by one', {
        size: valid.length,
        error: shortError(err),
      });
      return this.oneByOne(valid);
    }
    return valid.map((d, i) => this.settled(d, applied[i] as Applied));
  }

  /** Each message in its own transaction; the database unreachable: the rest fail alike. */
  private async oneByOne(valid: readonly Decoded[]): Promise<Outcome[]> {
    const outcomes: Outcome[] = [];
    let unreachable: { error: unknown } | undefined;
    for (const d of valid) {
      if (unreachable) {
        outcomes.push(this.failure(d.message, d.envelope, unreachable.error));
        continue;
      }
      let applied: Applied[];
      try {
        applied = await this.options.db.transaction((tx) => this.applyAll(tx, [d]));
      } catch (err) {
        outcomes.push(this.failure(d.message, d.envelope, err));
        if (isInfrastructureError(err)) unreachable = { error: err };
        continue;
      }
      outcomes.push(this.settled(d, applied[0] as Applied));
    }
    return outcomes;
  }

  /**
   * In the caller's transaction: claims the batch in one statement, applies each message claimed
   * now in order, then undoes the claims of the deferred ones in one statement.
   */
  private async applyAll(tx: SqlExecutor, batch: readonly Decoded[]): Promise<Applied[]> {
    const { rows } = await tx.query<{ claimed: string[] }>(
      this.claimSql,
      this.inbox.claimParams(batch.map(inboxId)),
    );
    const fresh = new Set(rows[0]?.claimed ?? []);
    const applied: Applied[] = [];
    const deferred: string[] = [];
    for (const d of batch) {
      if (!fresh.delete(inboxId(d))) {
        applied.push({ kind: 'duplicate' }); // processed before, or earlier in this batch
        continue;
      }
      const result = await this.options.apply(tx, d.envelope, d.message);
      if (result === DEFERRED) {
        deferred.push(inboxId(d));
        applied.push({ kind: 'deferred' });
      } else {
        applied.push({ kind: 'applied', result });
      }
    }
    if (deferred.length > 0) {
      await tx.query(this.inbox.undoSql(1), this.inbox.undoParams(deferred));
    }
    return applied;
  }

  private settled(d: Decoded, applied: Applied): Outcome {
    if (applied.kind === 'deferred') {
      const outcome = this.retry.outcome(d.message, d.envelope.occurred_at, 'deferred');
      this.journal('deferred', d.message, d.envelope, outcome.kind, 'missing predecessor');
      return outcome;
    }
    if (applied.kind === 'duplicate') {
      this.journal('duplicate', d.message, d.envelope, 'duplicate');
      return { kind: 'ack', result: 'duplicate' };
    }
    this.journal('effect-committed', d.message, d.envelope, applied.result);
    return { kind: 'ack', result: applied.result };
  }

  private failure(message: InboundMessage, envelope: Envelope | undefined, err: unknown): Outcome {
    return this.retry.outcome(message, envelope?.occurred_at, { error: err });
  }

  private journal(
    step: 'received' | 'duplicate' | 'effect-committed' | 'deferred',
    message: InboundMessage,
    envelope: Envelope | undefined,
    outcome?: string,
    reason?: string,
  ): void {
    this.options.journal?.record({
      step,
      messageId: message.messageId ?? null,
      eventType: envelope?.type ?? message.type ?? null,
      attempt: message.attempt,
      redelivered: message.redelivered,
      ...(outcome ? { outcome } : {}),
      ...(reason ? { reason } : {}),
      ...(message.redrive ? { redrives: message.redrive.count } : {}),
    });
  }
}

/**
 * The message's id as the inbox returns it: PostgreSQL prints a uuid in lower case, and an
 * envelope id may be written in upper case.
 */
const inboxId = (d: Decoded) => d.envelope.id.toLowerCase();
