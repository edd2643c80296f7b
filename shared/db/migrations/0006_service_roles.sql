-- Least privilege per side: one NOLOGIN group role per side of the pipeline, with exactly the
-- statements that side's code runs, and one login user per side (created on deploy by the migrate
-- function from its own secret, shared/db/appRole.ts):
--   orders_app       place-order, order-results: orders, its outbox, its inbox rows, set-aside results
--   inventory_app    reserve-inventory: stock, reservations, inventory_outbox, its inbox rows
--   relay_app        outbox-relay: claims and marks rows of both outboxes
--   maintenance_app  maintenance: deletes old inbox rows and published outbox rows
-- Grants are per table (a column a later migration adds is covered; a table is not: a migration
-- that adds one grants it to the sides that use it). `pipeline_app` (0005) stays as it is for
-- functions deployed before this migration, until an operator retires its login (docs/deploy.md, "Secret rotation").

-- Roles belong to the cluster, not the database: created once, tolerating another database's
-- migration creating the same role at the same moment.
DO $$
DECLARE
  r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['orders_app', 'inventory_app', 'relay_app', 'maintenance_app'] LOOP
    BEGIN
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN', r);
      END IF;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN
      NULL;
    END;
  END LOOP;
END
$$;

GRANT USAGE ON SCHEMA public TO orders_app, inventory_app, relay_app, maintenance_app;

DO $$
BEGIN
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO orders_app, inventory_app, relay_app, maintenance_app',
                 current_database());
END
$$;

-- The order side: places and cancels orders (each with its outbox row), shows them, and applies
-- inventory's results (inbox claim, reservation status, results it cannot apply set aside).
GRANT SELECT, INSERT, UPDATE ON orders TO orders_app;
GRANT INSERT ON outbox TO orders_app;
GRANT SELECT, INSERT ON processed_messages TO orders_app;
-- (ON CONFLICT (message_id) reads the conflict target: SELECT on that column only)
GRANT INSERT, SELECT (message_id) ON order_results_set_aside TO orders_app;
GRANT USAGE ON SEQUENCE order_results_set_aside_id_seq TO orders_app;

-- Inventory: locks and reserves stock, and sets units on hand (the operator's `stock set`, which
-- runs as this side's login against a deployment), writes reservations and its result events,
-- claims its inbox rows and undoes deferred claims. It never deletes stock.
GRANT SELECT, INSERT, UPDATE ON stock TO inventory_app;
GRANT SELECT, INSERT, UPDATE ON reservations TO inventory_app;
-- (ON CONFLICT (id) reads the conflict target: SELECT on that column only)
GRANT INSERT, SELECT (id) ON inventory_outbox TO inventory_app;
GRANT SELECT, INSERT, DELETE ON processed_messages TO inventory_app;

-- The relay: claims due rows (FOR UPDATE needs UPDATE), marks them published or failed, sets
-- aside what cannot be published, reads the backlog figures. It writes no business row.
GRANT SELECT, UPDATE ON outbox, inventory_outbox TO relay_app;

-- Maintenance: finds and deletes expired rows; no INSERT, no UPDATE anywhere.
GRANT SELECT, DELETE ON processed_messages, outbox, inventory_outbox TO maintenance_app;

-- Row-level security. The inbox is one table for both consumers, keyed by consumer_name: each side
-- sees, claims and undoes only its own consumer's rows (the claim, INSERT … ON CONFLICT DO NOTHING
-- RETURNING, checks the new row against the side's INSERT and SELECT policies: a claim in the other
-- consumer's name fails, new or not). The outbox writers' policies admit every row (their grants
-- bound them); INSERT … ON CONFLICT needs a SELECT policy too. Maintenance deletes any consumer's
-- old inbox rows, and published outbox rows only: an unpublished event is never deleted, whatever
-- the cutoff. The owner (the migrating role) is not subject to these policies; `pipeline_app`
-- keeps every row until its login is retired.
ALTER TABLE processed_messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY inbox_order_results ON processed_messages TO orders_app
  USING (consumer_name = 'order-results') WITH CHECK (consumer_name = 'order-results');
CREATE POLICY inbox_inventory ON processed_messages TO inventory_app
  USING (consumer_name = 'inventory') WITH CHECK (consumer_name = 'inventory');
CREATE POLICY inbox_maintenance ON processed_messages TO maintenance_app USING (true);
CREATE POLICY inbox_legacy ON processed_messages TO pipeline_app USING (true) WITH CHECK (true);

ALTER TABLE outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY outbox_orders ON outbox TO orders_app USING (true) WITH CHECK (true);
CREATE POLICY outbox_relay ON outbox TO relay_app USING (true) WITH CHECK (true);
CREATE POLICY outbox_maintenance ON outbox TO maintenance_app USING (published_at IS NOT NULL);
CREATE POLICY outbox_legacy ON outbox TO pipeline_app USING (true) WITH CHECK (true);

ALTER TABLE inventory_outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY inventory_outbox_inventory ON inventory_outbox TO inventory_app
  USING (true) WITH CHECK (true);
CREATE POLICY inventory_outbox_relay ON inventory_outbox TO relay_app USING (true) WITH CHECK (true);
CREATE POLICY inventory_outbox_maintenance ON inventory_outbox TO maintenance_app
  USING (published_at IS NOT NULL);
CREATE POLICY inventory_outbox_legacy ON inventory_outbox TO pipeline_app
  USING (true) WITH CHECK (true);
