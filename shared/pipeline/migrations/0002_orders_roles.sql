-- Least privilege in the order service's database: one NOLOGIN group role per side that reaches it,
-- with exactly the statements that side's code runs, and one login user per side (created on deploy
-- by the migrate function from its own secret):
--   orders_app       place-order, order-results: orders, the outbox, its inbox rows, set-aside results
--   relay_app        outbox-relay: claims and marks the outbox's rows
--   maintenance_app  maintenance: deletes old inbox rows and published outbox rows
-- Grants are per table (a column a later migration adds is covered; a table is not).

-- Roles belong to the cluster, not the database: created once, tolerating the other service's
-- database creating the same role at the same moment.
DO $$
DECLARE
  r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['orders_app', 'relay_app', 'maintenance_app'] LOOP
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
GRANT USAGE ON SCHEMA public TO orders_app, relay_app, maintenance_app;

DO $$
BEGIN
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO orders_app, relay_app, maintenance_app',
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

-- The relay: claims due rows (FOR UPDATE needs UPDATE), marks them published or failed, sets
-- aside what cannot be published, reads the backlog figures. It writes no business row.
GRANT SELECT, UPDATE ON outbox TO relay_app;

-- Maintenance: finds and deletes expired rows; no INSERT, no UPDATE anywhere.
GRANT SELECT, DELETE ON processed_messages, outbox TO maintenance_app;

-- Row-level security. The order side sees, claims and undoes only its own consumer's inbox rows
-- (the claim, INSERT … ON CONFLICT DO NOTHING RETURNING, checks the new row against its INSERT and
-- SELECT policies). The outbox writers' policies admit every row (their grants bound them);
-- INSERT … ON CONFLICT needs a SELECT policy too. Maintenance deletes old inbox rows, and published
-- outbox rows only: an unpublished event is never deleted, whatever the cutoff. The owner (the
-- migrating role) is not subject to these policies. Policy names carry the service, so that both
-- services' schemas can also share one database (the tests' layout).
ALTER TABLE processed_messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY orders_inbox_order_results ON processed_messages TO orders_app
  USING (consumer_name = 'order-results') WITH CHECK (consumer_name = 'order-results');
CREATE POLICY orders_inbox_maintenance ON processed_messages TO maintenance_app USING (true);

ALTER TABLE outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY outbox_orders ON outbox TO orders_app USING (true) WITH CHECK (true);
CREATE POLICY outbox_relay ON outbox TO relay_app USING (true) WITH CHECK (true);
CREATE POLICY outbox_maintenance ON outbox TO maintenance_app USING (published_at IS NOT NULL);
