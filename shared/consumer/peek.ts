/**
 * What a diagnosis or a park notice may read from a message body that may not be a valid
 * envelope (it is being parked, after all): each field only if it has the expected type, strings
 * clipped. Never throws; an unreadable body gives `{}`.
 */
export interface PeekedEnvelope {
  id?: string;
  type?: string;
  schemaVersion?: string;
  producer?: string;
  correlationId?: string;
  traceId?: string;
  aggregate?: { type?: string; id?: string; version?: number };
  data?: Record<string, unknown>;
}

const clip = (v: unknown, max: number): string | undefined =>
  typeof v === 'string' && v.length > 0 ? v.slice(0, max) : undefined;

export function peekEnvelope(body: Buffer | string): PeekedEnvelope {
  let value: unknown;
  try {
    value = JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
  } catch {
    return {};
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return {};
  const o = value as Record<string, unknown>;
  const out: PeekedEnvelope = {};
  const set = <K extends keyof PeekedEnvelope>(k: K, v: PeekedEnvelope[K] | undefined) => {
    if (v !== undefined) out[k] = v;
  };
  set('id', clip(o.id, 128));
  set('type', clip(o.type, 128));
  set('schemaVersion', clip(o.schema_version, 16));
  set('producer', clip(o.producer, 128));
  set('correlationId', clip(o.correlation_id, 256));
  set('traceId', clip(o.trace_id, 128));
  const a = o.aggregate;
  if (a && typeof a === 'object' && !Array.isArray(a)) {
    const agg = a as Record<string, unknown>;
    const version = agg.version;
    out.aggregate = {
      ...(clip(agg.type, 128) ? { type: clip(agg.type, 128) } : {}),
      ...(clip(agg.id, 128) ? { id: clip(agg.id, 128) } : {}),
      ...(typeof version === 'number' && Number.isInteger(version) && version >= 1
        ? { version }
        : {}),
    };
  }
  if (o.data && typeof o.data === 'object' && !Array.isArray(o.data)) {
    out.data = o.data as Record<string, unknown>;
  }
  return out;
}
