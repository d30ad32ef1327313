-- FeedSync schema, version 8: a replica's cursor names the event it stands on
-- (Docs/decisions/0024-a-rewritten-log-is-found-and-told.md).
--
-- `synced_check` is the check value of the source's event at `synced_seq` (its kind, post, like count and commit
-- millisecond), as the source's last pull answer gave it. The next pull sends it back, so that a source whose log was
-- rewritten (a failover to a standby that lacked the last commits, a restored backup) tells a seq that now names another
-- event from the one the replica has, and answers with a resync snapshot. NULL before the first pull, and for a cursor
-- the source gave without one.
ALTER TABLE replica_state ADD COLUMN synced_check INTEGER;
