-- Least privilege: one NOLOGIN group role per side of the service, with what its code runs. The
-- login users are created on deploy from their secrets, as members of these
-- (`ServerlessDatabase`'s `logins`, `migrationsLambdaHandler`). Roles belong to the cluster, not
-- the database: created once, tolerating another database creating the same role at once.
DO $$
DECLARE
  r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['shipping_app', 'shipping_relay'] LOOP
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

GRANT USAGE ON SCHEMA public TO shipping_app, shipping_relay;

-- The consumer: its inbox claims, its shipments, its events appended to its outbox.
GRANT SELECT, INSERT, DELETE ON processed_messages TO shipping_app;
GRANT SELECT, INSERT ON shipments TO shipping_app;
GRANT INSERT, SELECT (id) ON shipping_outbox TO shipping_app;

-- The relay: claims and marks its outbox's rows.
GRANT SELECT, UPDATE ON shipping_outbox TO shipping_relay;
