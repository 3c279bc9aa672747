-- Checks the migration left the table as expected.

SELECT count(*) FROM orders;

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE column_name = 'sales_channel') THEN
    RAISE EXCEPTION 'sales_channel missing';
  END IF;
END $$;

DROP TABLE orders_backup;
