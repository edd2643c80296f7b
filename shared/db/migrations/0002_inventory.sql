-- Inventory service: stock, reservations, the idempotent consumer's inbox and its own outbox.

CREATE TABLE stock (
  sku        text        PRIMARY KEY CHECK (length(sku) BETWEEN 1 AND 64),
  available  integer     NOT NULL CHECK (available >= 0),   -- units on hand
  reserved   integer     NOT NULL DEFAULT 0 CHECK (reserved >= 0),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (reserved <= available)                             -- never promise more than we have
);

-- One reservation per order; a rejected order is recorded too, so GET /orders/{id} can tell.
CREATE TABLE reservations (
  order_id    uuid        PRIMARY KEY,
  sku         text        NOT NULL REFERENCES stock (sku),
  quantity    integer     NOT NULL CHECK (quantity > 0),
  status      text        NOT NULL CHECK (status IN ('reserved', 'released', 'rejected')),
  message_id  uuid        NOT NULL,                          -- the event that produced this state
  reason      text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- The inbox: the claim commits in the same transaction as the effect; a redelivery finds the row.
CREATE TABLE processed_messages (
  consumer_name text        NOT NULL CHECK (consumer_name <> ''),
  message_id    uuid        NOT NULL,
  processed_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (consumer_name, message_id)
);
-- maintenance deletes old inbox rows by age
CREATE INDEX processed_messages_processed_at_idx ON processed_messages (processed_at);

CREATE TABLE inventory_outbox (LIKE outbox INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES);
