-- pgbench script: one W2 page query (autocommit) on the seeded schema of ../shared/peers/postgres: the 50 newest
-- posts older than a random keyset cursor (created_at, id), each with its like_count and whether a random viewer
-- liked it. Variables: -D users=10000 -D posts=100000 (the seed's sizes; created_at runs from 1600000000).
\set viewer random(1, :users)
\set cursor_at 1600000000 + random(0, :posts - 1)
\set cursor_id random(1, :posts)
SELECT p.id, p.author, p.body, p.created_at, p.like_count,
       EXISTS (SELECT 1 FROM likes l WHERE l.user_id = :viewer AND l.post_id = p.id) AS liked
FROM posts p
WHERE (p.created_at, p.id) < (:cursor_at, :cursor_id)
ORDER BY p.created_at DESC, p.id DESC
LIMIT 50;
