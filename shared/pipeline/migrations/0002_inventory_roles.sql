-- Least privilege in the inventory service's database: one NOLOGIN group role per side that
-- reaches it, with exactly the statements that side's code runs, and one login user per side
-- (created on deploy by the migrate function from its own secret):
--   inventory_app    reserve-inventory: stock, reservations, inventory_outbox, its inbox rows
--   relay_app        outbox-relay: claims and marks inventory_outbox's rows
--   maintenance_app  maintenance: deletes old inbox rows and published outbox rows
-- Grants are per table (a column a later migration adds is covered; a table is not).

-- Roles belong to the cluster, not the database: created once, tolerating the other service's
-- database creating the same role at the same moment.
DO $$
DECLARE
  r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['inventory_app', 'relay_app', 'maintenance_app'] LOOP
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

-- Nobody but the owner creates objects in the schema (PostgreSQL 15+ default, made explicit).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO inventory_app, relay_app, maintenance_app;

DO $$
BEGIN
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO inventory_app, relay_app, maintenance_app',
                 current_database());
END
$$;

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
GRANT SELECT, UPDATE ON inventory_outbox TO relay_app;

-- Maintenance: finds and deletes expired rows; no INSERT, no UPDATE anywhere.
GRANT SELECT, DELETE ON processed_messages, inventory_outbox TO maintenance_app;

-- Row-level security, as in the order service's database: inventory sees, claims and undoes only
-- its own consumer's inbox rows; maintenance deletes old inbox rows and published outbox rows only.
-- Policy names carry the service, so that both services' schemas can also share one database.
ALTER TABLE processed_messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY inventory_inbox_inventory ON processed_messages TO inventory_app
  USING (consumer_name = 'inventory') WITH CHECK (consumer_name = 'inventory');
CREATE POLICY inventory_inbox_maintenance ON processed_messages TO maintenance_app USING (true);

ALTER TABLE inventory_outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY inventory_outbox_inventory ON inventory_outbox TO inventory_app
  USING (true) WITH CHECK (true);
CREATE POLICY inventory_outbox_relay ON inventory_outbox TO relay_app USING (true) WITH CHECK (true);
CREATE POLICY inventory_outbox_maintenance ON inventory_outbox TO maintenance_app
  USING (published_at IS NOT NULL);
