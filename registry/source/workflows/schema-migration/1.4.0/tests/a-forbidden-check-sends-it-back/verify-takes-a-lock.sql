-- Checks C1-C8 of migration/change.json for the public.orders.sales_channel migration.
-- Read-only: every query is a SELECT (a failure raises from a DO block, which writes nothing).
-- Every check runs on a hot standby except C2 and C7, which must run on the primary: a
-- standby's pg_stat_activity does not show the primary's sessions, so they fail on a standby.
--   psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -v phase=before-up -f migration/verify.sql
-- phase is before-up, after-up, before-down or after-down. Each check prints its id, t or f,
-- and a detail. before-down's C8 prints kept=N, the number of orders whose channel the
-- rollback copy must keep; give it to after-down: -v phase=after-down -v kept=N.
-- psql exits 3 on the first failed check, on a missing phase and on an unknown one, and 0
-- only when every check of the phase holds: a script or a person can trust the exit status.

\set ON_ERROR_STOP on
\if :{?phase}
\else
    \warn 'verify.sql: give the phase, e.g. -v phase=before-up (before-up, after-up, before-down, after-down)'
    DO $$ BEGIN RAISE EXCEPTION 'verify.sql: no phase given'; END $$;
\endif

SELECT :'phase' = 'before-up' AS is_before_up,
       :'phase' = 'after-up' AS is_after_up,
       :'phase' = 'before-down' AS is_before_down,
       :'phase' = 'after-down' AS is_after_down
\gset

-- One verification at a time.
SELECT pg_advisory_lock(4242) AS locked
\gset

\if :is_before_up
-- C1: nothing of the migration exists yet.
SELECT 'C1' AS check_id,
       NOT EXISTS (SELECT 1 FROM information_schema.columns
                    WHERE table_schema = 'public' AND table_name = 'orders'
                      AND column_name = 'sales_channel')
   AND NOT EXISTS (SELECT 1 FROM pg_constraint
                    WHERE conrelid = 'public.orders'::regclass
                      AND conname = 'orders_sales_channel_check')
   AND to_regclass('public.orders_sales_channel_created_at_idx') IS NULL AS ok,
       'column, constraint and index absent' AS detail
\gset
\echo :check_id :ok :detail
\if :ok
\else
    DO $$ BEGIN RAISE EXCEPTION 'verify.sql: check failed (its detail is above)'; END $$;
\endif

-- C2 (on the primary): no transaction older than 60 s that the ACCESS EXCLUSIVE lock would
-- queue behind.
SELECT 'C2' AS check_id,
       NOT pg_is_in_recovery() AND count(*) = 0 AS ok,
       CASE WHEN pg_is_in_recovery()
            THEN 'connected to a standby, which cannot see the primary''s transactions: run C2 on the primary'
            ELSE coalesce(string_agg(pid::text || ' open since ' || xact_start::text, ', '),
                          'no long transactions') END AS detail
  FROM pg_stat_activity
 WHERE datname = current_database()
   AND pid <> pg_backend_pid()
   AND xact_start < now() - interval '60 seconds'
\gset
\echo :check_id :ok :detail
\if :ok
\else
    DO $$ BEGIN RAISE EXCEPTION 'verify.sql: check failed (its detail is above)'; END $$;
\endif
\elif :is_after_up
-- C3: column shape and validated constraint.
SELECT 'C3' AS check_id,
       coalesce(bool_and(c.data_type = 'text'
                         AND c.is_nullable = 'NO'
                         AND c.column_default = '''web''::text'), false)
   AND EXISTS (SELECT 1 FROM pg_constraint
                WHERE conrelid = 'public.orders'::regclass
                  AND conname = 'orders_sales_channel_check'
                  AND convalidated) AS ok,
       coalesce(max(c.data_type || ', nullable ' || c.is_nullable || ', default ' ||
                    coalesce(c.column_default, 'none')), 'column missing') AS detail
  FROM information_schema.columns c
 WHERE c.table_schema = 'public' AND c.table_name = 'orders'
   AND c.column_name = 'sales_channel'
\gset
\echo :check_id :ok :detail
\if :ok
\else
    DO $$ BEGIN RAISE EXCEPTION 'verify.sql: check failed (its detail is above)'; END $$;
\endif

-- C4: the concurrently built index exists and is valid.
SELECT 'C4' AS check_id,
       coalesce(bool_and(i.indisvalid AND i.indisready), false) AS ok,
       CASE WHEN count(*) = 0 THEN 'index missing'
            WHEN bool_and(i.indisvalid) THEN 'index valid'
            ELSE 'index INVALID: DROP INDEX CONCURRENTLY it and rerun up.sql' END AS detail
  FROM pg_index i
 WHERE i.indexrelid = to_regclass('public.orders_sales_channel_created_at_idx')
\gset
\echo :check_id :ok :detail
\if :ok
\else
    DO $$ BEGIN RAISE EXCEPTION 'verify.sql: check failed (its detail is above)'; END $$;
\endif

-- C5: backfill complete. Scans public.orders (about 2 minutes); prefer the standby.
SELECT 'C5' AS check_id,
       count(*) = 0 AS ok,
       count(*)::text || ' app orders still classified web' AS detail
  FROM public.orders
 WHERE app_client_id IS NOT NULL AND sales_channel = 'web'
\gset
\echo :check_id :ok :detail
\if :ok
\else
    DO $$ BEGIN RAISE EXCEPTION 'verify.sql: check failed (its detail is above)'; END $$;
\endif
\elif :is_before_down
-- C7 (on the primary): no session of order-service 4.19 is connected. 4.19 writes
-- sales_channel: its inserts would fail once down.sql drops the column, and what it writes
-- between the copy and the drop would be lost. 4.19 connects as order-service/4.19.x.
SELECT 'C7' AS check_id,
       NOT pg_is_in_recovery() AND count(*) = 0 AS ok,
       CASE WHEN pg_is_in_recovery()
            THEN 'connected to a standby, which cannot see the primary''s sessions: run C7 on the primary'
            WHEN count(*) = 0 THEN 'no order-service 4.19 session'
            ELSE count(*)::text || ' order-service 4.19 sessions still connected: deploy 4.18 first' END AS detail
  FROM pg_stat_activity
 WHERE datname = current_database()
   AND pid <> pg_backend_pid()
   AND application_name LIKE 'order-service/4.19%'
\gset
\echo :check_id :ok :detail
\if :ok
\else
    DO $$ BEGIN RAISE EXCEPTION 'verify.sql: check failed (its detail is above)'; END $$;
\endif

-- C8: orders_sales_channel_created_at_idx is valid, so down.sql's copy of the 'phone' and
-- 'partner' orders under its lock reads only those rows (milliseconds), not the table; prints
-- kept=N, the orders whose channel the rollback copy must hold after down (after-down C6
-- compares). Reads them through the index: seconds; prefer the standby. Once the column is
-- gone the count fails psql (column does not exist): down has already run.
SELECT 'C8' AS check_id,
       coalesce((SELECT indisvalid FROM pg_index
                  WHERE indexrelid = to_regclass('public.orders_sales_channel_created_at_idx')),
                false) AS ok,
       'kept=' || (SELECT count(*) FROM public.orders
                    WHERE sales_channel IN ('phone', 'partner'))::text
       || ' (give it to after-down as -v kept=N); index orders_sales_channel_created_at_idx '
       || coalesce((SELECT CASE WHEN indisvalid THEN 'valid'
                                ELSE 'INVALID: rerun up.sql first, which rebuilds it' END
                      FROM pg_index
                     WHERE indexrelid = to_regclass('public.orders_sales_channel_created_at_idx')),
                   'missing: rerun up.sql first') AS detail
\gset
\echo :check_id :ok :detail
\if :ok
\else
    DO $$ BEGIN RAISE EXCEPTION 'verify.sql: check failed (its detail is above)'; END $$;
\endif
\elif :is_after_down
\if :{?kept}
\else
    \warn 'verify.sql: give after-down the count before-down C8 printed, e.g. -v kept=12'
    DO $$ BEGIN RAISE EXCEPTION 'verify.sql: no kept count given'; END $$;
\endif
-- C6: everything the up migration added is gone, and the rollback copy holds at least the
-- kept=N orders before-down C8 counted. Without the copy the query itself fails psql
-- (relation does not exist), as loudly as a failed check.
SELECT 'C6' AS check_id,
       NOT EXISTS (SELECT 1 FROM information_schema.columns
                    WHERE table_schema = 'public' AND table_name = 'orders'
                      AND column_name = 'sales_channel')
   AND NOT EXISTS (SELECT 1 FROM pg_constraint
                    WHERE conrelid = 'public.orders'::regclass
                      AND conname = 'orders_sales_channel_check')
   AND to_regclass('public.orders_sales_channel_created_at_idx') IS NULL
   AND kept.n >= :'kept'::bigint AS ok,
       'column, constraint and index removed; the rollback copy holds ' || kept.n::text
       || ' orders, before-down counted ' || :'kept' AS detail
  FROM (SELECT count(*) AS n FROM public.orders_sales_channel_rollback) AS kept
\gset
\echo :check_id :ok :detail
\if :ok
\else
    DO $$ BEGIN RAISE EXCEPTION 'verify.sql: check failed (its detail is above)'; END $$;
\endif
\else
    \warn 'verify.sql: unknown phase' :'phase' '(use before-up, after-up, before-down or after-down)'
    DO $$ BEGIN RAISE EXCEPTION 'verify.sql: unknown phase'; END $$;
\endif
