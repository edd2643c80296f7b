-- Order service: orders and their transactional outbox.
-- The outbox row is written in the same transaction as the order change; the relay publishes it later
-- and sets published_at only after the broker confirmed it (DESIGN §1, §8).

CREATE TABLE orders (
  id               uuid        PRIMARY KEY,
  sku              text        NOT NULL CHECK (length(sku) BETWEEN 1 AND 64),
  quantity         integer     NOT NULL CHECK (quantity > 0),
  status           text        NOT NULL DEFAULT 'placed' CHECK (status IN ('placed', 'cancelled')),
  -- aggregate version: 1 after order.created, +1 for each later order event
  version          integer     NOT NULL DEFAULT 1 CHECK (version >= 1),
  created_event_id uuid        NOT NULL UNIQUE,
  correlation_id   text        NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Shared shape of both outboxes (outbox for the order service, inventory_outbox for inventory).
CREATE TABLE outbox (
  id                 uuid        PRIMARY KEY,                -- the event id; never changes
  event_type         text        NOT NULL CHECK (event_type <> ''),
  schema_version     text        NOT NULL CHECK (schema_version ~ '^[0-9]+\.[0-9]+$'),
  aggregate_type     text        NOT NULL,
  aggregate_id       text        NOT NULL,
  aggregate_version  integer     NOT NULL CHECK (aggregate_version >= 1),
  payload            jsonb       NOT NULL,                   -- the envelope's `data`
  producer           text        NOT NULL,
  correlation_id     text        NOT NULL,
  causation_id       text,
  occurred_at        timestamptz NOT NULL DEFAULT now(),
  published_at       timestamptz,                            -- NULL = not yet confirmed by the broker
  attempts           integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  next_attempt_at    timestamptz NOT NULL DEFAULT now(),
  last_error         text,
  -- set when attempts reached the relay's limit: the row leaves the batches until an operator acts
  needs_attention_at timestamptz,
  -- one event per aggregate version: two writers can never both emit "version 2 of order X"
  UNIQUE (aggregate_type, aggregate_id, aggregate_version),
  CHECK (published_at IS NULL OR needs_attention_at IS NULL)
);

-- The relay's claim query reads only this partial index: published rows cost nothing however many there are.
CREATE INDEX outbox_unpublished_idx ON outbox (occurred_at)
  WHERE published_at IS NULL AND needs_attention_at IS NULL;
CREATE INDEX outbox_needs_attention_idx ON outbox (needs_attention_at)
  WHERE needs_attention_at IS NOT NULL AND published_at IS NULL;
