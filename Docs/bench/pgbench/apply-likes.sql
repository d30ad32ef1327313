-- pgbench script: FeedSync's like function without a lane, one W1 toggle per autocommit statement, on a FeedSync
-- database (`feedsync --db URL seed --posts 10000 --users 1000 --likes 0`). It shows what one statement per
-- transaction can reach on a server when every commit appends to the ordered event log:
--   pgbench -n -M prepared -D users=1000 -D posts=10000 -f Docs/bench/pgbench/apply-likes.sql -c C -j C -T 8 URL
-- (C = 1, 4, 16). FeedSync sends the lane form (`feedsync_apply_likes_first_send`, `apply-likes-first-send.sql`, which
-- also records the batch on its lane) with many callers' toggles per statement.
\set uid random(1, :users)
\set pid random(1, :posts)
SELECT * FROM unnest(feedsync_like_results(ARRAY[0]::integer[], ARRAY['toggle']::text[], ARRAY['user' || :uid]::text[],
    ARRAY['post' || :pid]::text[], ARRAY[(extract(epoch FROM now()) * 1000)::bigint]));
