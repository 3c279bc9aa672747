SET statement_timeout = '5s';
SET lock_timeout = '1s';

ALTER TABLE orders
    RENAME COLUMN channel TO sales_channel;

CREATE INDEX orders_created_idx ON orders (created_at);
