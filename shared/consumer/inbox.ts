import type { SqlParam } from '../db/types.js';

/** The inbox table: one row per (consumer name, message id), its primary key. */
export const INBOX_TABLE = 'processed_messages';

/**
 * The inbox of an idempotent consumer (`processed_messages`, unique per consumer name and message
 * id). A message is claimed by inserting its row, and the claim MUST commit in the same
 * transaction as the message's effect: it commits with the effect or rolls back with it. A
 * redelivery after a commit then finds the row (a duplicate, not applied again); a redelivery
 * after a rollback claims afresh. A message that is not applied now (deferred: an earlier event is
 * missing) has its claim undone in that same transaction, so that its retry is not taken for a
 * duplicate.
 *
 * The inbox offers SQL fragments rather than statements, so a use case can claim, lock and read
 * in one round trip and undo, write and publish in another. Each fragment reads two parameters
 * from `$first`: the consumer name, then a JSON array of message ids (`claimParams`,
 * `undoParams`).
 */
export class Inbox {
  constructor(readonly consumer: string) {
    if (!consumer) throw new Error('inbox: the consumer name must not be empty');
  }

  /**
   * A CTE body that claims the messages and returns `message_id` for each one claimed now; a
   * message already in the inbox returns nothing. Inserts in the order of the ids (sorted by
   * `claimParams`), so two concurrent claims never wait on each other in a cycle.
   */
  claimSql(first: number): string {
    return `INSERT INTO ${INBOX_TABLE} (consumer_name, message_id)
         SELECT $${first}, m::uuid FROM jsonb_array_elements_text($${first + 1}::jsonb) AS m
         ON CONFLICT DO NOTHING RETURNING message_id`;
  }

  /** The values `claimSql` reads: the consumer name and the distinct ids, sorted. */
  claimParams(messageIds: readonly string[]): SqlParam[] {
    return [this.consumer, JSON.stringify([...new Set(messageIds)].sort())];
  }

  /** A CTE body that undoes the claims of messages that were deferred (in the same transaction). */
  undoSql(first: number): string {
    return `DELETE FROM ${INBOX_TABLE} WHERE consumer_name = $${first}
            AND message_id = ANY (ARRAY(SELECT jsonb_array_elements_text($${first + 1}::jsonb)::uuid))`;
  }

  /** The values `undoSql` reads. */
  undoParams(messageIds: readonly string[]): SqlParam[] {
    return [this.consumer, JSON.stringify(messageIds)];
  }
}
