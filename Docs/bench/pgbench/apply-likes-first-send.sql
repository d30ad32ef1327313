-- pgbench script: exactly the statement FeedSync sends for one W1 toggle the first time — the batch function on a lane
-- of the client's own, recorded on the lane without reading it first (`feedsync_apply_likes_first_send`, migration
-- 0010) — on a FeedSync database (`feedsync --db URL seed --posts 10000 --users 1000 --likes 0`):
--   pgbench -n -M prepared -D users=1000 -D posts=10000 -f Docs/bench/pgbench/apply-likes-first-send.sql -c C -j C -T 8 URL
-- Each pgbench client is one lane (a UUID made from its client id); its batches are numbered by the clock in
-- microseconds, which grows from one statement of a client to its next.
\set uid random(1, :users)
\set pid random(1, :posts)
SELECT * FROM unnest(feedsync_apply_likes_first_send(md5('pgbench lane ' || :client_id)::uuid,
    (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, ARRAY[0]::integer[], ARRAY['toggle']::text[],
    ARRAY['user' || :uid]::text[], ARRAY['post' || :pid]::text[], ARRAY[(extract(epoch FROM now()) * 1000)::bigint]));
