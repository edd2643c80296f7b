-- The shipping service's own table: one shipment per order, scheduled when its stock was reserved.
CREATE TABLE shipments (
  order_id     uuid        PRIMARY KEY,
  sku          text        NOT NULL,
  quantity     integer     NOT NULL CHECK (quantity > 0),
  scheduled_at timestamptz NOT NULL DEFAULT now()
);
