import { createInterface } from 'node:readline';
import { NodeProcess } from '../../devkit/processes.js';
import type { JournalEntry } from '../../shared/consumer/journal.js';
import type { LabChildSpec } from '../child.js';

export interface LabProcessEvents {
  /** A journal line of the process (a consumer step). */
  journal(entry: JournalEntry): void;
  /** Anything else it reports (`invocation-failed`, `round`, `round-failed`). */
  event(name: string, fields: Record<string, unknown>): void;
}

/**
 * A consumer or relay of a lab run in a process of its own (lab/child.ts), with the signals a
 * scenario sends it: SIGKILL (a crash: no finally, no ack, no mark), SIGSTOP/SIGCONT (a process
 * paused past its lease: a long GC, a frozen container, a laptop lid). Its journal lines feed the
 * run's journal as they are written.
 */
export class LabProcess {
  readonly proc: NodeProcess;
  /** Deliveries this process received (journal `received`). */
  received = 0;
  /** Event ids this process received, in order. */
  readonly receivedIds: string[] = [];
  private ready = false;
  private readonly readyWaiters: (() => void)[] = [];

  constructor(
    readonly name: string,
    spec: LabChildSpec,
    events: LabProcessEvents,
  ) {
    this.proc = new NodeProcess({
      name,
      args: ['--import', 'tsx', 'lab/child.ts'],
      env: { LAB_CHILD: JSON.stringify(spec), POWERTOOLS_LOG_LEVEL: 'SILENT' },
    });
    const stdout = this.proc.child.stdout;
    if (!stdout) throw new Error(`${name}: no stdout`);
    createInterface({ input: stdout }).on('line', (text) => {
      if (!text.startsWith('{')) return;
      let parsed: { message?: string; journal?: JournalEntry; event?: string };
      try {
        parsed = JSON.parse(text);
      } catch {
        return; // a line cut short by SIGKILL
      }
      if (parsed.message === 'journal' && parsed.journal) {
        if (parsed.journal.step === 'received') {
          this.received++;
          if (parsed.journal.messageId) this.receivedIds.push(parsed.journal.messageId);
        }
        events.journal(parsed.journal);
      } else if (parsed.message === 'lab-child' && parsed.event) {
        if (parsed.event === 'ready') {
          this.ready = true;
          for (const w of this.readyWaiters.splice(0)) w();
        } else {
          events.event(parsed.event, parsed as Record<string, unknown>);
        }
      }
    });
  }

  /** Resolves once the process says it is ready; rejects if it exits first or after `timeoutMs`. */
  waitReady(timeoutMs = 60_000): Promise<void> {
    if (this.ready) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${this.name} not ready after ${timeoutMs} ms${this.errors()}`)),
        timeoutMs,
      );
      this.readyWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
      void this.proc.exited.then((exit) => {
        clearTimeout(timer);
        reject(
          new Error(
            `${this.name} exited (${exit.code ?? exit.signal}) before it was ready${this.errors()}`,
          ),
        );
      });
    });
  }

  private errors(): string {
    const e = this.proc.errors().trim();
    return e ? `: ${e.split('\n').slice(-5).join(' | ')}` : '';
  }

  /** SIGKILL: the process dies at once. Resolves once it is gone. */
  async kill(): Promise<void> {
    this.proc.kill();
    await this.proc.exited;
  }

  /** SIGSTOP: frozen; the kernel keeps its sockets open, it answers nothing. */
  pause(): void {
    this.proc.signal('SIGSTOP');
  }

  /** SIGCONT: it carries on where it was, unaware of the time that passed. */
  resume(): void {
    this.proc.signal('SIGCONT');
  }

  /** SIGCONT (if paused) and SIGTERM, SIGKILL after `graceMs`. */
  async stop(graceMs = 2_000): Promise<void> {
    if (!this.proc.running) return;
    this.proc.signal('SIGCONT');
    await this.proc.stop(graceMs);
  }
}
