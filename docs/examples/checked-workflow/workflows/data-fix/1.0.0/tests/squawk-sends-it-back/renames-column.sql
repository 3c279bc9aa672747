SET statement_timeout = '5s';
ALTER TABLE orders RENAME COLUMN channel TO sales_channel;
