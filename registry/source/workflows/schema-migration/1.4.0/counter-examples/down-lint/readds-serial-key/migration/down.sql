-- Down: remove public.orders.sales_channel (reverses migration/up.sql; migration/change.json).
-- A psql script for PostgreSQL 16 (psql's \set, \gset and \if). Run it with psql in autocommit
-- mode, never with --single-transaction: it opens its one short transaction itself.
--   psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -f migration/down.sql
-- Order (change.json, rollback.notes): deploy order-service 4.18 everywhere, run verify.sql
-- before-down (C7: no 4.19 session left; C8 prints kept=N), run this file, then verify.sql
-- after-down with -v kept=N. 4.19 writes sales_channel, so its inserts would fail once the
-- column is gone: this file refuses, inside its transaction, while a 4.19 session is connected.
-- Every statement is safe to run again after a failure at any point; never run two copies at once.

\set ON_ERROR_STOP on

-- Nothing here may wait longer than the lock budget (2 s, change.json) for a lock, and no
-- statement runs unbounded.
SET lock_timeout = '2s';
SET statement_timeout = '5s';

-- 1. 'phone' and 'partner' cannot be derived again once the column is gone (change.json,
--    rollback.notes): they are copied here first. A new table: no lock on public.orders.
CREATE TABLE IF NOT EXISTS public.orders_sales_channel_rollback (
    order_id bigint PRIMARY KEY,
    sales_channel text NOT NULL,
    saved_at timestamptz NOT NULL DEFAULT now()
);

SELECT EXISTS (
           SELECT 1 FROM information_schema.columns
            WHERE table_schema = 'public'
              AND table_name = 'orders'
              AND column_name = 'sales_channel'
       ) AS has_column
\gset
\if :has_column

-- 2. The bulk of the copy, outside any lock that blocks traffic: reads public.orders under
--    ACCESS SHARE through orders_sales_channel_created_at_idx (only 'phone' and 'partner' rows,
--    which only 4.19 writes: thousands, seconds at most). Bounded at 10 minutes.
SET statement_timeout = '10min';
INSERT INTO public.orders_sales_channel_rollback AS r (order_id, sales_channel)
SELECT id, sales_channel
  FROM public.orders
 WHERE sales_channel IN ('phone', 'partner')
ON CONFLICT (order_id) DO UPDATE
    SET sales_channel = EXCLUDED.sales_channel, saved_at = now()
    WHERE r.sales_channel IS DISTINCT FROM EXCLUDED.sales_channel;

-- 3. One short transaction: take the table's ACCESS EXCLUSIVE lock (waiting at most 2 s),
--    refuse while 4.19 is connected, copy the rows changed since step 2, drop. Nothing can
--    write public.orders between the last copy and the drop, so nothing written is lost; the
--    lock is held for the milliseconds the copy of the few new rows and the catalog changes
--    take (each statement bounded at 2 s, the wait included). A timeout rolls the whole
--    transaction back and changes nothing: rerun the file later.
BEGIN;
SET LOCAL lock_timeout = '2s';
SET LOCAL statement_timeout = '2s';

-- Takes ACCESS EXCLUSIVE on public.orders until COMMIT.
ALTER TABLE public.orders DROP CONSTRAINT IF EXISTS orders_sales_channel_check;

-- Refuse while order-service 4.19 (application_name order-service/4.19...) is connected: its
-- inserts name sales_channel and would fail after COMMIT. Rolls everything back.
SELECT count(*) = 0 AS no_new_release,
       coalesce(string_agg(pid::text, ', '), 'none') AS new_release_pids
  FROM pg_stat_activity
 WHERE datname = current_database()
   AND pid <> pg_backend_pid()
   AND application_name LIKE 'order-service/4.19%'
\gset
\if :no_new_release
\else
    \warn 'down.sql: order-service 4.19 is still connected (pids' :new_release_pids '): deploy 4.18 first'
    DO $$ BEGIN RAISE EXCEPTION 'down.sql: order-service 4.19 is still connected; nothing was changed'; END $$;
\endif

-- Rows 4.19 set to 'phone' or 'partner' since step 2, read through the index.
INSERT INTO public.orders_sales_channel_rollback AS r (order_id, sales_channel)
SELECT id, sales_channel
  FROM public.orders
 WHERE sales_channel IN ('phone', 'partner')
ON CONFLICT (order_id) DO UPDATE
    SET sales_channel = EXCLUDED.sales_channel, saved_at = now()
    WHERE r.sales_channel IS DISTINCT FROM EXCLUDED.sales_channel;

-- DESTRUCTIVE: drops every recorded channel, and with the column the index
-- orders_sales_channel_created_at_idx built on it. Catalog-only (no rewrite); the space is
-- reclaimed as rows are updated. 'phone' and 'partner' survive in
-- public.orders_sales_channel_rollback.
ALTER TABLE public.orders DROP COLUMN IF EXISTS sales_channel;

-- Number the rollback rows.
ALTER TABLE public.orders_sales_channel_rollback
    ADD COLUMN IF NOT EXISTS id serial PRIMARY KEY;

COMMIT;
\endif

