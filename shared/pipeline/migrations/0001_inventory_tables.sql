-- The inventory service's database: stock and reservations. Its inbox (`processed_messages`) and
-- its outbox (`inventory_outbox`) are the library's tables (libraryMigrations), applied before this.

CREATE TABLE stock (
  sku        text        PRIMARY KEY CHECK (length(sku) BETWEEN 1 AND 64),
  available  integer     NOT NULL CHECK (available >= 0),   -- units on hand
  reserved   integer     NOT NULL DEFAULT 0 CHECK (reserved >= 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (reserved <= available)                             -- never promise more than we have
);

-- One reservation per order; a rejected order is recorded too (also for a SKU that does not exist,
-- so no reference to stock). order_version is the last applied order version: the consumer's
-- ordering policy (docs/design.md) compares an event's version with it.
CREATE TABLE reservations (
  order_id      uuid        PRIMARY KEY,
  sku           text        NOT NULL,
  quantity      integer     NOT NULL CHECK (quantity > 0),
  status        text        NOT NULL CHECK (status IN ('reserved', 'released', 'rejected')),
  message_id    uuid        NOT NULL,                        -- the event that produced this state
  reason        text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  order_version integer     NOT NULL DEFAULT 1 CHECK (order_version >= 1)
);
