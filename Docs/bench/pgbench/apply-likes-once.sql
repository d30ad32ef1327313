-- pgbench script: exactly the statement FeedSync sends for one W1 toggle — the batch function on a lane of the
-- client's own (`feedsync_apply_likes_once`, which also records the batch and its result rows on the lane, migration
-- 0007) — on a FeedSync database (`feedsync --db URL seed --posts 10000 --users 1000 --likes 0`):
--   pgbench -n -M prepared -D users=1000 -D posts=10000 -f Docs/bench/pgbench/apply-likes-once.sql -c C -j C -T 8 URL
-- Each pgbench client is one lane (a UUID made from its client id); its batches are numbered by the clock in
-- microseconds, which grows from one statement of a client to its next.
\set uid random(1, :users)
\set pid random(1, :posts)
SELECT * FROM feedsync_apply_likes_once(md5('pgbench lane ' || :client_id)::uuid,
    (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, ARRAY[0]::integer[], ARRAY['toggle']::text[],
    ARRAY['user' || :uid]::text[], ARRAY['post' || :pid]::text[], ARRAY[(extract(epoch FROM now()) * 1000)::bigint]);
