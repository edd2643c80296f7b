import type { ConsumerSettings } from '../../devkit/consumers.js';
import type { TcpProxy } from '../../devkit/TcpProxy.js';
import { amqpUrlVia } from '../../devkit/transports/rabbitmq.js';
import { RABBITMQ_NAMES, RETRY_NAMES } from '../../shared/pipeline/names.js';
import type { Publisher } from '../../shared/port/types.js';
import type {
  RabbitMqBackend,
  RabbitMqBackendConfig,
} from '../../shared/transport/rabbitmq/index.js';
import { Rig } from './rig.js';
import type { ConsumerLease, PartialPublish, PeerBroker, ProxiedBroker } from './types.js';

/** The heartbeat a frozen consumer is given (s): its connection is closed after ~2×. */
const HEARTBEAT_S = 1;

/** The order events' routes: `orders` to the inventory queue and to the audit queue. */
const ROUTES = [
  [RABBITMQ_NAMES.inventoryQueue, RABBITMQ_NAMES.ordersExchange, 'order.created'],
  [RABBITMQ_NAMES.inventoryQueue, RABBITMQ_NAMES.ordersExchange, 'order.cancelled'],
  [RABBITMQ_NAMES.auditQueue, RABBITMQ_NAMES.ordersExchange, 'order.#'],
] as const;

const PARKING_BINDING = [
  RETRY_NAMES.parkingQueue,
  RETRY_NAMES.parkingExchange,
  RETRY_NAMES.parkingRoutingKey,
] as const;

/** The RabbitMQ backend on the run's virtual host, and its broker controls. */
export class RabbitRig extends Rig {
  readonly backend: RabbitMqBackend = this.scratch.backend('rabbitmq', this.backendBase, {
    ...this.connectionSettings(`lab-${this.scratch.name}`),
    deliveryLimit: this.settings.deliveryLimit,
  });

  /** How the lab's connections behave: quick reconnects, short publish timeouts. */
  private connectionSettings(connectionName: string): Partial<RabbitMqBackendConfig> {
    return {
      connectionName,
      reconnect: { baseMs: 50, maxMs: 500 },
      publish: { confirmTimeoutMs: 5_000, connectTimeoutMs: 1_000 },
    };
  }

  readonly redriveMechanism = 'via inventory.orders.requeue, no copy to audit.orders';

  /** A frozen child loses its deliveries when the broker closes its silent connection. */
  consumerLease(): ConsumerLease {
    return {
      child: { backend: { heartbeatSeconds: HEARTBEAT_S } },
      text: `its connection's heartbeat timeout (${HEARTBEAT_S} s; the broker closes it after two missed)`,
      ms: HEARTBEAT_S * 2_000,
    };
  }

  /** The AMQP URL of this run's vhost through a proxy, for a child process. */
  override async proxiedBroker(): Promise<ProxiedBroker> {
    const proxy = await this.proxyTo(this.services.amqpUrl, 5672);
    const url = amqpUrlVia(this.services.amqpUrl, proxy.port, this.backend.config.vhost);
    return { child: { backend: { url } }, proxy };
  }

  /**
   * The cancellations' routes removed: the broker returns them (mandatory) while it confirms the
   * rest; published without the route check (a lost route, which the check holds back and whose
   * window it republishes, is not this fault).
   */
  override async failPartOfNextPublish(): Promise<PartialPublish> {
    const publisher = this.uncheckedPublisher();
    await this.breakCancellations();
    return {
      publisher,
      mark: "the cancellations' routes removed (returned, mandatory)",
      restore: () => this.restoreRoute(),
      note: (round) =>
        `the broker confirmed ${round.published} and returned ${round.failed} (NO_ROUTE) in one confirm window: only the returned rows retried once the routes were back`,
    };
  }

  peerBroker(): PeerBroker {
    return this.scratch.vhost ? { amqpUrl: this.scratch.vhost.amqpUrl } : {};
  }

  consumerSettings(): Partial<ConsumerSettings> & { invocationFailed: string } {
    return {
      batchWindowMs: this.settings.mqBatchWindowMs,
      invocationFailed: 'invocation failed, batch requeued',
    };
  }

  async breakRoute(): Promise<void> {
    await this.backend.withChannel(async (ch) => {
      for (const [q, ex, key] of ROUTES) await ch.unbindQueue(q, ex, key);
    });
  }

  override async restoreRoute(): Promise<void> {
    await this.backend.withChannel(async (ch) => {
      for (const [q, ex, key] of ROUTES) await ch.bindQueue(q, ex, key);
      // breakCancellations' narrowed audit route, if any
      await ch.unbindQueue(
        RABBITMQ_NAMES.auditQueue,
        RABBITMQ_NAMES.ordersExchange,
        'order.created',
      );
    });
  }

  /**
   * Only `order.cancelled` becomes unroutable: its binding to the inventory queue is removed and
   * the audit queue's `order.#` narrowed to `order.created` (`restoreRoute` puts them back).
   */
  private async breakCancellations(): Promise<void> {
    await this.backend.withChannel(async (ch) => {
      await ch.bindQueue(RABBITMQ_NAMES.auditQueue, RABBITMQ_NAMES.ordersExchange, 'order.created');
      await ch.unbindQueue(RABBITMQ_NAMES.auditQueue, RABBITMQ_NAMES.ordersExchange, 'order.#');
      await ch.unbindQueue(
        RABBITMQ_NAMES.inventoryQueue,
        RABBITMQ_NAMES.ordersExchange,
        'order.cancelled',
      );
    });
  }

  async breakParking(): Promise<void> {
    await this.backend.withChannel((ch) => ch.unbindQueue(...PARKING_BINDING));
  }

  /**
   * Binds parking again and re-applies inventory.orders' policy with a change: on RabbitMQ 3.10 a
   * held dead letter is otherwise retried only after 180 s (dead_letter_worker_publisher_confirm_timeout).
   */
  override async restoreParking(): Promise<void> {
    await this.backend.withChannel((ch) => ch.bindQueue(...PARKING_BINDING));
    await this.backend.applyPolicies({
      deliveryLimit: this.settings.deliveryLimit + 1,
      only: [RABBITMQ_NAMES.inventoryQueue],
    });
  }

  /** A second backend on the run's vhost whose connection goes through a proxy. */
  async proxiedPublisher(): Promise<{ publisher: Publisher; proxy: TcpProxy }> {
    const proxy = await this.proxyTo(this.services.amqpUrl, 5672);
    const vhost = this.backend.config.vhost;
    const proxied = this.scratch.backend('rabbitmq', this.backendBase, {
      ...this.connectionSettings(`lab-relay-${this.scratch.name}`),
      url: amqpUrlVia(this.services.amqpUrl, proxy.port, vhost),
    });
    this.closers.push(() => proxied.close());
    return { publisher: proxied.publisher('outbox'), proxy };
  }

  /**
   * A publisher on the run's vhost without the route check: a publish whose route is gone is
   * returned by the broker (mandatory), never held back or looked at as a lost route.
   */
  private uncheckedPublisher(): Publisher {
    const unchecked = this.scratch.backend('rabbitmq', this.backendBase, {
      ...this.connectionSettings(`lab-unchecked-${this.scratch.name}`),
      routeCheck: false,
    });
    this.closers.push(() => unchecked.close());
    return unchecked.publisher('outbox');
  }
}
