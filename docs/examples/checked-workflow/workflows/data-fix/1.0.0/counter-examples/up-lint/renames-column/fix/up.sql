ALTER TABLE orders RENAME COLUMN channel TO sales_channel;
