import { Journal, type JournalEntry } from '../shared/consumer/journal.js';
import { waitFor } from './waitFor.js';

export interface JournalLine extends JournalEntry {
  at: number;
}

/** A journal that keeps every line with its time, and waits on them. */
export class JournalRecorder {
  readonly journal = new Journal();
  readonly lines: JournalLine[] = [];

  constructor() {
    this.journal.addSink((e) => this.lines.push({ ...e, at: Date.now() }));
  }

  linesFor(messageId: string): JournalLine[] {
    return this.lines.filter((l) => l.messageId === messageId);
  }

  waitForLine(messageId: string, step: JournalEntry['step'], count = 1, timeoutMs = 20_000) {
    return waitFor(() => this.linesFor(messageId).filter((l) => l.step === step).length >= count, {
      timeoutMs,
      message: `${count}× ${step} for ${messageId} (saw: ${this.linesFor(messageId)
        .map((l) => l.step)
        .join(', ')})`,
    });
  }
}
