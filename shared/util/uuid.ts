import { createHash } from 'node:crypto';

/** Namespace for ids this project derives from other ids (a fixed random UUID). */
export const DERIVED_ID_NAMESPACE = '6f1c3a52-8d0e-4b7a-9a43-2f5b1e7c9d10';

/**
 * RFC 9562 UUID version 5 (SHA-1, name-based): the same name always gives the same id. Used for
 * events derived from an incoming message (e.g. the rejection of an order event), so a redelivery
 * can never create a second one. (Eight lines of `node:crypto` instead of a dependency.)
 */
export function uuidV5(name: string, namespace: string = DERIVED_ID_NAMESPACE): string {
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  const hash = createHash('sha1').update(ns).update(name, 'utf8').digest();
  hash[6] = ((hash[6] as number) & 0x0f) | 0x50;
  hash[8] = ((hash[8] as number) & 0x3f) | 0x80;
  const h = hash.subarray(0, 16).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
