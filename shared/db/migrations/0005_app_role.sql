-- Least privilege: the functions connect as a login user that is a member of `pipeline_app`, a
-- NOLOGIN group role with exactly what the pipeline's code runs: rows of the pipeline tables
-- (SELECT, INSERT, UPDATE, DELETE: maintenance deletes by age), sequences, and nothing else (no
-- DDL, no TRUNCATE, no schema_migrations). The login user itself is created on deploy by the
-- migrate function from its own secret (shared/db/appRole.ts); locally nothing logs in as it.

-- Roles belong to the cluster, not the database: create it once, tolerate another database's
-- migration creating it at the same moment.
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pipeline_app') THEN
    CREATE ROLE pipeline_app NOLOGIN;
  END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
  NULL;
END
$$;

-- Nobody but the owner creates objects in the schema (PostgreSQL 15+ default, made explicit).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO pipeline_app;

DO $$
BEGIN
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO pipeline_app', current_database());
END
$$;

GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO pipeline_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO pipeline_app;
REVOKE ALL ON schema_migrations FROM pipeline_app;

-- Tables and sequences later migrations create (run by the same role) are covered too.
ALTER DEFAULT PRIVILEGES IN SCHEMA public
  GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO pipeline_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
  GRANT USAGE, SELECT ON SEQUENCES TO pipeline_app;
