SET statement_timeout = '5s';
ALTER TABLE orders ADD COLUMN note text;
ALTER TABLE orders ADD COLUMN ;
