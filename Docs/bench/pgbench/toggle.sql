-- pgbench script: one W1 toggle per transaction, on the schema of ../shared/peers/postgres/schema.sql.
-- The same transaction as that yardstick's toggle.sql (the like row, the post's like_count and one events row),
-- with the post range a pgbench variable so that one script serves both cases of compare-postgres.sh:
--   pgbench -D users=1000 -D posts=10000 -f toggle.sql   spread over 10,000 posts (W1)
--   pgbench -D users=1000 -D posts=1     -f toggle.sql   every toggle on post 1 (the hot post)
--
-- Flow (branches on the client, as an application would): try to DELETE the like; when nothing was deleted,
-- INSERT it. Under READ COMMITTED a concurrent toggle may insert the same like between our DELETE and INSERT;
-- ON CONFLICT ... DO UPDATE ... WHERE false then inserts nothing but locks the committed row, and a second DELETE
-- (new snapshot) removes it, so every interleaving is some serial order of toggles and no client fails.
-- \aset (not \gset) after DELETE and INSERT: it leaves the variable at 0 when no row came back.
\set uid random(1, :users)
\set pid random(1, :posts)
\set deleted 0
\set inserted 0
BEGIN;
DELETE FROM likes WHERE user_id = :uid AND post_id = :pid RETURNING 1 AS deleted \aset
\if :deleted = 0
INSERT INTO likes AS l (user_id, post_id, created_at) VALUES (:uid, :pid, extract(epoch FROM now())::bigint) ON CONFLICT (user_id, post_id) DO UPDATE SET created_at = l.created_at WHERE false RETURNING 1 AS inserted \aset
\if :inserted = 0
DELETE FROM likes WHERE user_id = :uid AND post_id = :pid RETURNING 1 AS deleted \aset
\endif
\endif
UPDATE posts SET like_count = like_count + :inserted - :deleted WHERE id = :pid RETURNING like_count AS count_after \gset
INSERT INTO events (kind, user_id, post_id, like_count) VALUES (CASE WHEN :deleted = 1 THEN 'unliked' ELSE 'liked' END, :uid, :pid, :count_after);
COMMIT;
