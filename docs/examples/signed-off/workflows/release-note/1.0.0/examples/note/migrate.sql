SET statement_timeout = '5s';
ALTER TABLE orders ADD COLUMN IF NOT EXISTS sales_channel text;
