-- FeedSync schema for PostgreSQL, version 2: a bulk load is a baseline that durable subscribers must rebuild from.
--
-- As Migrations/sqlite/0002_bulk_load_baseline.sql: each bulk load that inserts likes bumps
-- `log_state.bulk_generation` and records the log's last seq at that moment in `bulk_through`; a subscriber stores,
-- next to its cursor, the generation its state already includes.

ALTER TABLE log_state ADD COLUMN bulk_generation BIGINT NOT NULL DEFAULT 0 CHECK (bulk_generation >= 0);
ALTER TABLE log_state ADD COLUMN bulk_through BIGINT NOT NULL DEFAULT 0 CHECK (bulk_through >= 0);
ALTER TABLE subscriber_cursors ADD COLUMN bulk_generation BIGINT NOT NULL DEFAULT 0 CHECK (bulk_generation >= 0);

-- A database bulk-loaded under version 1: its subscribers may have missed the loaded likes, so each rebuilds once.
UPDATE log_state
SET bulk_generation = 1, bulk_through = (SELECT last_seq FROM event_log_head WHERE id = 1)
WHERE id = 1 AND bulk_loaded = 1;
