-- FeedSync schema for PostgreSQL, version 4: each user's number of likes, kept by the like triggers.
--
-- The feed page flags the posts its viewer likes in one of two ways, chosen by this count (see Docs/Storage.md):
-- a viewer with few likes has them read once into a hash table (the cheapest form for most viewers), a viewer with
-- many has each row of the page probed in the primary key (a cost bounded by the page, however many likes). The
-- count is a planning hint, never shown; `check` verifies it like the posts' counts.
--
-- Lock order. Every like-writing transaction locks the rows it changes in one order, so that two never wait on each
-- other in a cycle: the posts (in post_key order), then the users (in user_key order), then the likes, then the
-- event-log head. The triggers below update the user's row after the post's; feedsync_apply_likes now takes the
-- users' rows right after the posts', before any like, so that two batches naming the same users in different
-- orders cannot deadlock.

ALTER TABLE users ADD COLUMN like_count BIGINT NOT NULL DEFAULT 0 CHECK (like_count >= 0);

UPDATE users u SET like_count = c.n
FROM (SELECT user_key, count(*) AS n FROM likes GROUP BY user_key) c
WHERE u.user_key = c.user_key;

CREATE OR REPLACE FUNCTION likes_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE posts SET like_count = like_count + 1 WHERE post_key = NEW.post_key;
    UPDATE users SET like_count = like_count + 1 WHERE user_key = NEW.user_key;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION likes_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE posts SET like_count = like_count - 1 WHERE post_key = OLD.post_key;
    UPDATE users SET like_count = like_count - 1 WHERE user_key = OLD.user_key;
    RETURN NULL;
END;
$$;

-- Version 3's batch, unchanged, under a new name; the batch function now takes the posts' and the users' rows in
-- order, then runs it (its own lock of the posts finds them already held).
ALTER FUNCTION feedsync_apply_likes(integer[], text[], text[], text[], bigint[]) RENAME TO feedsync_apply_likes_v3;

CREATE FUNCTION feedsync_apply_likes(units integer[], actions text[], user_ids text[], post_ids text[], ats bigint[])
RETURNS TABLE (
    out_failed_code text, out_failed_message text, out_liked boolean, out_like_count bigint, out_changed boolean,
    out_seq bigint
)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM posts p WHERE p.id = ANY (post_ids) ORDER BY p.post_key FOR NO KEY UPDATE;
    PERFORM 1 FROM users u WHERE u.id = ANY (user_ids) ORDER BY u.user_key FOR NO KEY UPDATE;
    RETURN QUERY SELECT * FROM feedsync_apply_likes_v3(units, actions, user_ids, post_ids, ats);
END;
$$;
