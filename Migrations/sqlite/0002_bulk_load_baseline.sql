-- FeedSync schema, version 2: a bulk load is a baseline that durable subscribers must rebuild from.
--
-- The bulk path (seeding) writes likes without events, so replaying the log cannot reproduce them. Each bulk load
-- that inserts likes bumps `log_state.bulk_generation` and records the log's last seq at that moment in
-- `bulk_through`. A subscriber stores, next to its cursor, the generation its state already includes; while the
-- log's generation is newer, it must rebuild from the tables (as after pruning) instead of replaying.

ALTER TABLE log_state ADD COLUMN bulk_generation INTEGER NOT NULL DEFAULT 0 CHECK (bulk_generation >= 0);
ALTER TABLE log_state ADD COLUMN bulk_through INTEGER NOT NULL DEFAULT 0 CHECK (bulk_through >= 0);
ALTER TABLE subscriber_cursors ADD COLUMN bulk_generation INTEGER NOT NULL DEFAULT 0 CHECK (bulk_generation >= 0);

-- A database bulk-loaded under version 1: its subscribers may have missed the loaded likes, so each rebuilds once.
UPDATE log_state
SET bulk_generation = 1, bulk_through = (SELECT coalesce(max(seq), 0) FROM events)
WHERE id = 1 AND bulk_loaded = 1;
