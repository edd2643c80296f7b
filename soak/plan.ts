/**
 * What the soak places: SKUs with their initial stock, and the orders (most reservable, some on
 * scarce or empty SKUs, a few on unknown SKUs, and a few poison events), all derived from a seed
 * so that a run can be repeated.
 */

/** mulberry32: a small, fast, seeded PRNG (uniform in [0, 1)). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

export type Random = () => number;

export const between = (r: Random, min: number, max: number) => min + r() * (max - min);
export const intBetween = (r: Random, min: number, max: number) =>
  Math.floor(between(r, min, max + 1));
export const pick = <T>(r: Random, items: readonly T[]): T =>
  items[Math.floor(r() * items.length)] as T;

/** A version-4 UUID from the seeded generator (so a seed names the same orders every time). */
export function uuidFrom(r: Random): string {
  const b = Array.from({ length: 16 }, () => Math.floor(r() * 256));
  b[6] = ((b[6] as number) & 0x0f) | 0x40;
  b[8] = ((b[8] as number) & 0x3f) | 0x80;
  const h = b.map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export type SkuKind = 'plenty' | 'scarce' | 'empty' | 'unknown';

/**
 * Poison: an `order.created` event whose envelope is valid (the relay publishes it) but whose data
 * the consumer must refuse for good, so it parks it with a diagnosis.
 */
export const POISON_KINDS = [
  'quantity-not-a-number',
  'quantity-missing',
  'order-id-mismatch',
  'sku-empty',
] as const;
export type PoisonKind = (typeof POISON_KINDS)[number];

export interface PlannedOrder {
  index: number;
  orderId: string;
  sku: string;
  quantity: number;
  /** Set for poison events (written straight to the database, not through the API). */
  poison?: PoisonKind;
}

export interface Plan {
  /** SKUs in the stock table with their initial units on hand (unknown SKUs are absent). */
  stock: Map<string, number>;
  kinds: Map<string, SkuKind>;
  orders: PlannedOrder[];
}

export function makePlan(options: { seed: number; orders: number; poison: number }): Plan {
  const r = rng(options.seed);
  const stock = new Map<string, number>();
  const kinds = new Map<string, SkuKind>();
  const skus: Record<SkuKind, string[]> = { plenty: [], scarce: [], empty: [], unknown: [] };
  const add = (kind: SkuKind, n: number, units: (i: number) => number | undefined) => {
    for (let i = 0; i < n; i++) {
      const sku = `SOAK-${kind.toUpperCase()}-${i}`;
      kinds.set(sku, kind);
      skus[kind].push(sku);
      const u = units(i);
      if (u !== undefined) stock.set(sku, u);
    }
  };
  // Plenty: never runs out (10× the expected demand). Scarce: runs out early on. Empty: none.
  const plentySkus = 36;
  const expectedDemand = Math.ceil((options.orders * 0.9 * 3) / plentySkus);
  add('plenty', plentySkus, () => expectedDemand * 10);
  add('scarce', 3, () => Math.max(3, Math.ceil(options.orders / 500)));
  add('empty', 1, () => 0);
  add('unknown', 2, () => undefined);

  const poisonAt = new Set<number>();
  for (let k = 0; k < options.poison; k++) {
    poisonAt.add(Math.floor(((k + 0.5) * options.orders) / options.poison));
  }
  const orders: PlannedOrder[] = [];
  let poisoned = 0;
  for (let index = 0; index < options.orders; index++) {
    const x = r();
    const kind: SkuKind = x < 0.9 ? 'plenty' : x < 0.96 ? 'scarce' : x < 0.98 ? 'empty' : 'unknown';
    const order: PlannedOrder = {
      index,
      orderId: uuidFrom(r),
      sku: pick(r, skus[kind]),
      quantity: intBetween(r, 1, 5),
    };
    if (poisonAt.has(index)) order.poison = POISON_KINDS[poisoned++ % POISON_KINDS.length];
    orders.push(order);
  }
  return { stock, kinds, orders };
}

/** The data (payload) a poison event carries in `outbox`. */
export function poisonPayload(order: PlannedOrder, r: Random): Record<string, unknown> {
  switch (order.poison) {
    case 'quantity-not-a-number':
      return { orderId: order.orderId, sku: order.sku, quantity: 'three' };
    case 'quantity-missing':
      return { orderId: order.orderId, sku: order.sku };
    case 'order-id-mismatch':
      return { orderId: uuidFrom(r), sku: order.sku, quantity: order.quantity };
    case 'sku-empty':
      return { orderId: order.orderId, sku: '', quantity: order.quantity };
    default:
      throw new Error(`order ${order.orderId} is not poison`);
  }
}
