-- A psql script: meta-commands, variables and \gset, linted as psql would send it.
\set ON_ERROR_STOP on
SET statement_timeout = '5s';
SELECT count(*) AS pending FROM orders WHERE note = :'phase' \gset
\if :{?phase}
ALTER TABLE orders RENAME COLUMN channel TO sales_channel;
\endif
DO $$ BEGIN PERFORM ':not_a_variable'; END $$;
