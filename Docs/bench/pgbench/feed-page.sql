-- pgbench script: FeedSync's own feed-page statement (`feedPageByViewerIDSQL`, the 50-row cap), one W2 page per
-- autocommit statement, on a FeedSync database seeded at W2's size
-- (`feedsync --db URL seed --posts 100000 --users 10000 --likes 1000000`). It shows what a client that sends exactly
-- FeedSync's statement, prepared, gets from the server, against `page.sql` (the peers' schema and statement):
--   pgbench -n -M prepared -D users=10000 -D posts=100000 -f Docs/bench/pgbench/feed-page.sql -c 1 -T 8 URL
-- The cursor and viewer are drawn as `feedsync-bench w2` draws them; 250 is the like-set limit of a 50-row page.
\set viewer random(1, :users)
\set cursor_at (1600000000 + random(0, :posts - 1)) * 1000
\set cursor_id random(1, :posts)
SELECT * FROM (
    SELECT (SELECT user_key FROM users WHERE id = 'user' || :viewer) AS viewer_key,
           p.id, p.author_id, p.body, p.created_at, p.like_count, p.post_key,
           CASE WHEN (SELECT like_count FROM users WHERE id = 'user' || :viewer) <= 250
           THEN p.post_key IN (
               SELECT l.post_key FROM likes l WHERE l.user_key = (SELECT user_key FROM users WHERE id = 'user' || :viewer))
           ELSE (SELECT true FROM likes l
                 WHERE l.user_key = (SELECT user_key FROM users WHERE id = 'user' || :viewer) AND l.post_key = p.post_key)
                IS NOT NULL
           END AS liked
    FROM posts p
    WHERE (p.created_at, p.post_key) < (:cursor_at, :cursor_id)
    ORDER BY p.created_at DESC, p.post_key DESC
    LIMIT 50
) p
LIMIT 50;
