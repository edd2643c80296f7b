import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEV_TEMPLATES_TIMEOUT_MS, devTemplates, startDev } from '../helpers/child.js';
import { InventoryRig } from '../helpers/inventory.js';

// (a consumer killed after its commit, on every transport: reserve.faults.test.ts)
describe('reserve inventory on RabbitMQ: the consumer process dies with a retry copy published', () => {
  let b: InventoryRig;
  beforeAll(() => devTemplates('rabbitmq'), DEV_TEMPLATES_TIMEOUT_MS);
  afterEach(() => b?.close());

  it('reserve.after-retry-publish:exit → the original and the copy are both delivered → one reservation', async () => {
    b = await InventoryRig.create('reserve_crash_retry');
    await b.stock('SKU-A', 10);
    const { proxy } = await b.proxiedDb();
    const viaProxy = new URL(b.t.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    const e = b.orderCreated('SKU-A', 2);

    // the child starts (migrations need the database), then loses the database and gets the message
    const child0 = startDev(['--role', 'consumer'], {
      FAULTS: 'reserve.after-retry-publish:exit',
      DATABASE_URL: viaProxy.toString(),
      INVENTORY_DATABASE_URL: viaProxy.toString(),
      AMQP_URL: b.vhost.amqpUrl,
    });
    await child0.output(/consumer: worker/);
    proxy.cut();
    await b.publish(e);
    const child = await child0.done;
    expect(child.signal, child.stderr).toBe('SIGKILL');
    expect(child.journal.filter((j) => j.messageId === e.id).map((j) => j.step)).toEqual([
      'received',
    ]);

    proxy.restore();
    await b.worker(); // direct database, no fault
    await b.waitForLine(e.id, 'acked', 2, 20_000);
    const lines = b.linesFor(e.id);
    expect(lines.filter((l) => l.step === 'effect-committed')).toHaveLength(1);
    expect(lines.filter((l) => l.step === 'duplicate')).toHaveLength(1);
    // one came back as a redelivery of the original, the other as the retry copy (attempt 1)
    expect(
      lines
        .filter((l) => l.step === 'received')
        .map((l) => l.attempt)
        .sort(),
    ).toEqual([0, 1]);
    expect(await b.stockOf('SKU-A')).toEqual({ available: 10, reserved: 2 });
    expect(await b.inboxRows(e.id)).toBe(1);
  });
});
