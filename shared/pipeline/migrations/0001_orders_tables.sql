-- The order service's database: orders and the results it set aside. Its outbox (`outbox`) and its
-- inbox (`processed_messages`) are the library's tables (libraryMigrations), applied before this.

CREATE TABLE orders (
  id                     uuid        PRIMARY KEY,
  sku                    text        NOT NULL CHECK (length(sku) BETWEEN 1 AND 64),
  quantity               integer     NOT NULL CHECK (quantity > 0),
  status                 text        NOT NULL DEFAULT 'placed' CHECK (status IN ('placed', 'cancelled')),
  -- aggregate version: 1 after order.created, +1 for each later order event
  version                integer     NOT NULL DEFAULT 1 CHECK (version >= 1),
  created_event_id       uuid        NOT NULL UNIQUE,
  correlation_id         text        NOT NULL,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now(),
  -- The order side's view of its reservation, from inventory's result events consumed from the
  -- results queue: the order service never reads inventory's database. 'pending' until the first
  -- result arrives; 'quarantined' while inventory holds the order's event parked.
  reservation_status     text        NOT NULL DEFAULT 'pending'
    CONSTRAINT orders_reservation_status_check
      CHECK (reservation_status IN ('pending', 'reserved', 'rejected', 'released', 'quarantined')),
  reservation_reason     text,
  -- aggregate.version of the applied result (the order version it answers); 0 = none yet. A result
  -- applies only if its version is higher: an older one arriving late changes nothing.
  reservation_version    integer     NOT NULL DEFAULT 0 CHECK (reservation_version >= 0),
  -- the event id of the applied result
  reservation_event_id   uuid,
  reservation_updated_at timestamptz,
  -- when inventory parked the order's event; set exactly while the order is quarantined
  reservation_parked_at  timestamptz,
  CONSTRAINT orders_reservation_parked_at_check
    CHECK ((reservation_status = 'quarantined') = (reservation_parked_at IS NOT NULL))
);

-- A result the order side cannot apply (an unreadable body, a schema it does not know, an order it
-- does not have) is set aside here with its reason, never dropped: an operator reads it and acts.
CREATE TABLE order_results_set_aside (
  id          bigserial   PRIMARY KEY,
  message_id  text        UNIQUE,        -- NULL when the transport carried none
  event_type  text,
  reason      text        NOT NULL,
  body        text        NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);
