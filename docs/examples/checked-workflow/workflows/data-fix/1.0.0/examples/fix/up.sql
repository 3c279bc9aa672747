SET statement_timeout = '5s';
UPDATE orders SET sales_channel = 'web' WHERE sales_channel IS NULL AND id < 1000;
