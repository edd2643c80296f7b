-- The order side's view of its reservation, from inventory's result events (inventory.reserved,
-- inventory.reservation_rejected, inventory.released) consumed from the results queue: the order
-- service never reads inventory's tables. 'pending' until the first result arrives.
ALTER TABLE orders
  ADD COLUMN reservation_status text NOT NULL DEFAULT 'pending'
    CHECK (reservation_status IN ('pending', 'reserved', 'rejected', 'released')),
  ADD COLUMN reservation_reason text,
  -- aggregate.version of the applied result (the order version it answers); 0 = none yet. A result
  -- applies only if its version is higher: an older one arriving late changes nothing.
  ADD COLUMN reservation_version integer NOT NULL DEFAULT 0 CHECK (reservation_version >= 0),
  -- the event id of the applied result
  ADD COLUMN reservation_event_id uuid,
  ADD COLUMN reservation_updated_at timestamptz;

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
