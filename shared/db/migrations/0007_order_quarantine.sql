-- An order whose event inventory parked shows it: `quarantined`, with the reason and the time it
-- was parked, from inventory's `inventory.reservation_quarantined` notice, instead of `pending`
-- for ever. A later decision on the same order version (after a redrive) replaces it.
ALTER TABLE orders DROP CONSTRAINT orders_reservation_status_check;
ALTER TABLE orders
  ADD CONSTRAINT orders_reservation_status_check
    CHECK (reservation_status IN ('pending', 'reserved', 'rejected', 'released', 'quarantined')),
  -- when inventory parked the order's event; set exactly while the order is quarantined
  ADD COLUMN reservation_parked_at timestamptz,
  ADD CONSTRAINT orders_reservation_parked_at_check
    CHECK ((reservation_status = 'quarantined') = (reservation_parked_at IS NOT NULL));

-- The trace id of the invocation that produced each event (envelope `trace_id`), so that it
-- travels with the event to every consumer and into the diagnosis of a parked message. NULL for
-- rows written before (their envelopes carry none).
ALTER TABLE outbox ADD COLUMN trace_id text CHECK (length(trace_id) BETWEEN 1 AND 128);
ALTER TABLE inventory_outbox ADD COLUMN trace_id text CHECK (length(trace_id) BETWEEN 1 AND 128);
