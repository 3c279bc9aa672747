-- Up: add public.orders.sales_channel (migration/change.json).
-- A psql script for PostgreSQL 16 (psql's \set, \gset and \if, and a DO block that commits per
-- batch): run it with psql in autocommit mode, never inside a transaction, never with
-- --single-transaction and not through a tool that wraps each migration in a transaction
-- (Flyway, Liquibase, Rails): the backfill commits per batch and CREATE INDEX CONCURRENTLY
-- cannot run in a transaction block.
--   psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -f migration/up.sql
-- Run it twice (change.json, compatibility): once before order-service 4.19 is deployed, which
-- adds the column 4.19 writes, and once after every 4.18 instance is gone, which classifies the
-- app orders 4.18 inserted in between; everything else is then a no-op.
-- Every statement is safe to run again after a failure at any point; never run two copies at once.
-- Every DDL statement is at the top level, where the linters read it: the catalog tests are
-- SELECTs whose answer psql keeps with \gset and tests with \if.

\set ON_ERROR_STOP on

-- Statements 1 and 2 need a brief ACCESS EXCLUSIVE lock. Waiting for it queues every later
-- reader and writer of public.orders behind us, so give up after 2 s (the lock budget in
-- change.json) and rerun the file later instead of stalling order traffic.
-- Both are catalog-only once they hold the lock, so 5 s bounds anything unexpected.
SET lock_timeout = '2s';
SET statement_timeout = '5s';

-- 1. Since PostgreSQL 11 a constant default is stored in the catalog: no table rewrite, no
--    scan, the lock is held for milliseconds. Existing and new rows read as 'web'.
ALTER TABLE public.orders
    ADD COLUMN IF NOT EXISTS sales_channel text NOT NULL DEFAULT 'web';

-- 2. NOT VALID skips the scan of existing rows; new and updated rows are checked at once.
--    PostgreSQL has no ADD CONSTRAINT IF NOT EXISTS, hence the catalog test.
SELECT NOT EXISTS (
           SELECT 1 FROM pg_constraint
            WHERE conrelid = 'public.orders'::regclass
              AND conname = 'orders_sales_channel_check'
       ) AS add_check
\gset
\if :add_check
ALTER TABLE public.orders
    ADD CONSTRAINT orders_sales_channel_check
    CHECK (sales_channel IN ('web', 'app', 'phone', 'partner')) NOT VALID;
\endif

-- The rest takes no lock that blocks reads or writes of public.orders (SHARE UPDATE EXCLUSIVE at
-- most), so waiting for a lock queues no traffic: wait up to a minute (autovacuum or a long
-- report query), then give up and rerun later. The backfill, the validation and the index
-- build run for minutes by design: bound each at 2 hours, far above the estimates below, so
-- that nothing runs unwatched forever. Never 0, which means no bound at all.
SET lock_timeout = '1min';
SET statement_timeout = '2h';

-- 3. Backfill orders placed through the app, 10 000 orders per transaction so that no batch
--    holds row locks or bloats the table for long. Walks the primary key from its smallest
--    value by key, not by id arithmetic, so sparse or huge ids cost nothing: each batch is an
--    index range scan of the next 10 000 ids. Only touches rows still 'web' with app_client_id
--    set: rerunning it is a no-op except for rows inserted since. About 3 800 batches for 38.2M
--    rows: expect 15 to 30 minutes. Watch replica lag (pg_stat_replication.replay_lag) while it
--    runs; it may be interrupted and rerun.
--    After a rollback and a new up, the channels only 4.19 could record ('phone', 'partner')
--    come back first from public.orders_sales_channel_rollback, which down.sql fills.
DO $$
DECLARE
    batch_size constant integer := 10000;
    last_id bigint;
    upper_id bigint;
BEGIN
    SELECT min(id) - 1 INTO last_id FROM public.orders;
    LOOP
        SELECT max(id) INTO upper_id
          FROM (SELECT id FROM public.orders
                 WHERE id > last_id ORDER BY id LIMIT batch_size) AS batch;
        EXIT WHEN upper_id IS NULL;
        IF to_regclass('public.orders_sales_channel_rollback') IS NOT NULL THEN
            UPDATE public.orders AS o
               SET sales_channel = r.sales_channel
              FROM public.orders_sales_channel_rollback AS r
             WHERE r.order_id = o.id
               AND o.id > last_id AND o.id <= upper_id
               AND o.sales_channel = 'web';
        END IF;
        UPDATE public.orders
           SET sales_channel = 'app'
         WHERE id > last_id AND id <= upper_id
           AND app_client_id IS NOT NULL
           AND sales_channel = 'web';
        COMMIT;
        last_id := upper_id;
        -- Leave room for autovacuum and replication between batches.
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$$;

-- 4. Scans the table under SHARE UPDATE EXCLUSIVE: reads and writes continue.
ALTER TABLE public.orders VALIDATE CONSTRAINT orders_sales_channel_check;

-- 5. Builds without blocking writes. A build that failed (or was cancelled) leaves an INVALID
--    index that IF NOT EXISTS would skip, so a rerun first drops an invalid one, without
--    blocking writes either. Check C4 tests validity after up.
SELECT EXISTS (
           SELECT 1 FROM pg_index
            WHERE indexrelid = to_regclass('public.orders_sales_channel_created_at_idx')
              AND NOT indisvalid
       ) AS index_invalid
\gset
\if :index_invalid
DROP INDEX CONCURRENTLY IF EXISTS public.orders_sales_channel_created_at_idx;
\endif

CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_sales_channel_created_at_idx
    ON public.orders (sales_channel, created_at);

-- 6. The old name, kept for readers of the column until they move.
SET lock_timeout = '2s';
SET statement_timeout = '5s';
ALTER TABLE public.orders RENAME COLUMN legacy_channel TO channel_before_2026;
