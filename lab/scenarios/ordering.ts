import type { Scenario } from '../scenario.js';
import { check } from '../types.js';
import { noDoubleEffect, releasedInOrder, startWithStock, v2Waited } from './common.js';

/**
 * v1 (created) and v2 (cancelled) of one order are published in order, but v1's first attempt
 * fails: on a standard queue (and on RabbitMQ) the retry reorders them, v2 arrives first.
 */
export const outOfOrder: Scenario = {
  id: 'out-of-order',
  forPeers: {
    reason:
      "the peers' handlers are written for order.created (the job they are compared on); none of the peers offers an ordering policy for versions",
    instead:
      "an order.cancelled would be the handler's own business: none of the libraries orders or defers by aggregate version",
  },
  title: 'Out of order: v2 before v1',
  stimulus:
    'An order is placed and cancelled through the API (v1 created, v2 cancelled, relayed in order); the reservation write for v1 fails until v1 has been scheduled for a retry.',
  invariant:
    'Final state by the ordering policy: reservation released at version 2, nothing held; v1 applied before v2, each once.',
  // about order: FIFO too
  notApplicable: () => undefined,
  async run(rig) {
    await startWithStock(rig, 'SKU-V', 10);
    const { orderId, eventId: v1 } = await rig.producer.placeOrder('SKU-V', 4);
    const { eventId: v2 } = await rig.producer.cancelOrder(orderId);
    Object.assign(rig.facts, { v1, v2, orderId });
    await rig.database.failures.fail(orderId);
    rig.run.mark('writes for v1 fail');
    await rig.producer.drainOutbox();
    await rig.run.waitForLine(v1, 'retry-scheduled');
    await rig.database.failures.clear();
    rig.run.faultEnded('writes succeed again');
    await rig.run.waitForLine(v2, 'effect-committed');
    await rig.run.waitFor(
      () =>
        rig.run
          .linesOf(v2, 'acked')
          .some((l) => l.at >= (rig.run.linesOf(v2, 'effect-committed')[0]?.at ?? Infinity)),
      'v2 acknowledged',
    );
  },
  async check(rig, m) {
    const checks = [...(await releasedInOrder(rig, m, 'SKU-V')), ...noDoubleEffect(m)];
    if (rig.configuration.fifo) {
      checks.push(
        check(m.deferrals === 0, `FIFO: v2 never processed before v1 (${m.deferrals} deferrals)`),
      );
    }
    return checks;
  },
  note: (rig, m) => {
    const waited = v2Waited(rig, m);
    if (m.deferrals > 0) {
      return `v2 overtook v1's retry: deferred ${m.deferrals}× by the version check (missing predecessor), applied ${waited} after it first arrived`;
    }
    return rig.configuration.fifo
      ? `the message group waited behind v1's retry: v2 first processed after v1 (0 deferrals), ${waited} from its first delivery to its effect`
      : `v2 happened to arrive after v1's retry (0 deferrals)`;
  },
};
