-- The consumer's ordering policy (DESIGN §7) needs the last applied order version per order.
-- Reservations also record rejections for SKUs that do not exist, so they no longer reference stock.
ALTER TABLE reservations ADD COLUMN order_version integer NOT NULL DEFAULT 1 CHECK (order_version >= 1);
ALTER TABLE reservations DROP CONSTRAINT reservations_sku_fkey;

-- Retention (maintenance) deletes published rows by age, in batches: find them without a scan.
CREATE INDEX outbox_published_at_idx ON outbox (published_at) WHERE published_at IS NOT NULL;
CREATE INDEX inventory_outbox_published_at_idx ON inventory_outbox (published_at)
  WHERE published_at IS NOT NULL;
