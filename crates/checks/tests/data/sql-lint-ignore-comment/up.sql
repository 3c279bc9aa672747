SET statement_timeout = '5s';
SET lock_timeout = '1s';
-- squawk-ignore renaming-column
ALTER TABLE orders RENAME COLUMN channel TO sales_channel;
