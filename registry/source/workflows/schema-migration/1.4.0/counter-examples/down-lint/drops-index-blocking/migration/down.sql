-- Down: remove public.orders.sales_channel (reverses migration/up.sql).
-- PostgreSQL 16. Run with psql in autocommit mode, never inside a transaction:
-- DROP INDEX cannot run in a transaction block.
--   psql "$DATABASE_URL" -X -v ON_ERROR_STOP=1 -f migration/down.sql
-- Deploy order-service 4.18 before running this: 4.19 writes sales_channel and would fail.
-- Every statement is safe to run again after a failure at any point.

\set ON_ERROR_STOP on
SET statement_timeout = 0;

-- 1. 'phone' and 'partner' cannot be derived again once the column is gone (change.json,
--    rollback.notes): copy them out first. Reads public.orders under ACCESS SHARE only.
CREATE TABLE IF NOT EXISTS public.orders_sales_channel_rollback (
    order_id bigint PRIMARY KEY,
    sales_channel text NOT NULL,
    saved_at timestamptz NOT NULL DEFAULT now()
);

DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM information_schema.columns
         WHERE table_schema = 'public'
           AND table_name = 'orders'
           AND column_name = 'sales_channel'
    ) THEN
        INSERT INTO public.orders_sales_channel_rollback (order_id, sales_channel)
        SELECT id, sales_channel
          FROM public.orders
         WHERE sales_channel IN ('phone', 'partner')
        ON CONFLICT (order_id) DO UPDATE
            SET sales_channel = EXCLUDED.sales_channel, saved_at = now();
    END IF;
END
$$;

-- 2 to 4 wait for locks: 2 for SHARE UPDATE EXCLUSIVE (it blocks no reads or writes but waits
-- for schema changes), 3 and 4 for a brief ACCESS EXCLUSIVE. Give up after 2 s rather than
-- queue traffic; the file is rerun later.
SET lock_timeout = '2s';

-- 2. Does not block reads or writes of public.orders.
DROP INDEX IF EXISTS public.orders_sales_channel_created_at_idx;

ALTER TABLE public.orders DROP CONSTRAINT IF EXISTS orders_sales_channel_check;

-- DESTRUCTIVE: drops every recorded channel. Catalog-only (no rewrite); the space is reclaimed
-- as rows are updated. 'phone' and 'partner' survive in public.orders_sales_channel_rollback.
ALTER TABLE public.orders DROP COLUMN IF EXISTS sales_channel;
