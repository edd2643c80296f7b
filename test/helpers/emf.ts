import { vi } from 'vitest';

/** A CloudWatch EMF document as Powertools Metrics writes it to stdout (one JSON line). */
export type EmfDocument = Record<string, unknown>;

/**
 * Captures the EMF documents Powertools Metrics writes to stdout from now until `restore`; every
 * other line still reaches stdout.
 */
export function emfCapture(): { docs: EmfDocument[]; restore: () => void } {
  const docs: EmfDocument[] = [];
  const write = process.stdout.write.bind(process.stdout);
  const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk, ...rest) => {
    const text = String(chunk);
    for (const line of text.split('\n')) {
      if (line.includes('"_aws"')) docs.push(JSON.parse(line) as EmfDocument);
    }
    if (text.includes('"_aws"')) return true;
    return write(chunk as string, ...(rest as []));
  });
  return { docs, restore: () => spy.mockRestore() };
}

/**
 * Runs `fn` capturing its EMF documents: what it returned, the documents, and the documents
 * merged per outbox (the relay flushes the heartbeat and counts before it queries the backlog).
 */
export async function captureEmf<T>(fn: () => Promise<T>): Promise<{
  result: T;
  docs: EmfDocument[];
  byOutbox: Map<string, EmfDocument>;
}> {
  const capture = emfCapture();
  let result: T;
  try {
    result = await fn();
  } finally {
    capture.restore();
  }
  const byOutbox = new Map<string, EmfDocument>();
  for (const d of capture.docs) {
    const outbox = String(d.Outbox);
    byOutbox.set(outbox, { ...byOutbox.get(outbox), ...d });
  }
  return { result, docs: capture.docs, byOutbox };
}
