-- Up: add public.orders.sales_channel (migration/change.json).
-- PostgreSQL 16. Run with psql in autocommit mode, never inside a transaction and never with
-- --single-transaction: the backfill commits per batch and CREATE INDEX CONCURRENTLY cannot run
-- in a transaction block.
--   psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -f migration/up.sql
-- Every statement is safe to run again after a failure at any point.

\set ON_ERROR_STOP on

-- Statements 1 and 2 need a brief ACCESS EXCLUSIVE lock. Waiting for it queues every later
-- reader and writer of public.orders behind us, so give up after 2 s (the lock budget in
-- change.json) and rerun the file later instead of stalling order traffic.
SET lock_timeout = '2s';
SET statement_timeout = 0;

-- 1. Since PostgreSQL 11 a constant default is stored in the catalog: no table rewrite, no
--    scan, the lock is held for milliseconds. Existing and new rows read as 'web'.
ALTER TABLE public.orders
    ADD COLUMN IF NOT EXISTS sales_channel text NOT NULL DEFAULT 'web';

-- 2. NOT VALID skips the scan of existing rows; new and updated rows are checked at once.
--    PostgreSQL has no ADD CONSTRAINT IF NOT EXISTS, hence the catalog test.
DO $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_constraint
         WHERE conrelid = 'public.orders'::regclass
           AND conname = 'orders_sales_channel_check'
    ) THEN
        ALTER TABLE public.orders
            ADD CONSTRAINT orders_sales_channel_check
            CHECK (sales_channel IN ('web', 'app', 'phone', 'partner')) NOT VALID;
    END IF;
END
$$;

-- The rest takes no lock that blocks reads or writes of public.orders; it may wait for long
-- transactions to finish, which is harmless, so lift the lock timeout.
SET lock_timeout = 0;

-- 3. Backfill orders placed through the app, 10 000 ids per transaction so that no batch holds
--    row locks or bloats the table for long. Walks the primary key, so each batch is an index
--    range scan. Only touches rows still 'web' with app_client_id set: rerunning it is a no-op.
--    About 3 900 batches for 38.2M rows: expect 15 to 30 minutes. Watch replica lag
--    (pg_stat_replication.replay_lag) while it runs; it may be interrupted and rerun.
DO $$
DECLARE
    batch_size constant bigint := 10000;
    next_id bigint := 0;
    max_id bigint;
BEGIN
    SELECT coalesce(max(id), 0) INTO max_id FROM public.orders;
    WHILE next_id <= max_id LOOP
        UPDATE public.orders
           SET sales_channel = 'app'
         WHERE id >= next_id AND id < next_id + batch_size
           AND app_client_id IS NOT NULL
           AND sales_channel = 'web';
        COMMIT;
        next_id := next_id + batch_size;
        -- Leave room for autovacuum and replication between batches.
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$$;

-- 4. Scans the table under SHARE UPDATE EXCLUSIVE: reads and writes continue.
ALTER TABLE public.orders VALIDATE CONSTRAINT orders_sales_channel_check;

-- 5. Builds without blocking writes. If it fails it leaves an INVALID index that IF NOT EXISTS
--    would skip: check C4 catches that; drop it with DROP INDEX CONCURRENTLY and rerun.
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_sales_channel_created_at_idx
    ON public.orders (sales_channel, created_at);
