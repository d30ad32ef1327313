-- FeedSync schema for PostgreSQL, version 9: deleting posts and erasing users (Docs/decisions/0022-deleting.md).
--
-- The event log gains the kinds `postDeleted` and `userDeleted`. Erasing a user sets `user_id` to '' on every event
-- that named them, keeping seq, kind, post, count and time, so no cursor becomes invalid and no follower sees a gap:
-- the append-only guard lets exactly that update through. The log's CHECK constraints (unnamed in version 1) are
-- replaced by named ones.
DO $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'events'::regclass AND contype = 'c' LOOP
        EXECUTE format('ALTER TABLE events DROP CONSTRAINT %I', c.conname);
    END LOOP;
END;
$$;

ALTER TABLE events
    ADD CONSTRAINT events_seq_positive CHECK (seq > 0),
    ADD CONSTRAINT events_kind CHECK (kind IN ('liked', 'unliked', 'postCreated', 'userCreated', 'postDeleted',
                                               'userDeleted')),
    ADD CONSTRAINT events_user_id_length CHECK (char_length(user_id) <= 64),
    ADD CONSTRAINT events_post_id_length CHECK (post_id IS NULL OR char_length(post_id) BETWEEN 1 AND 64),
    ADD CONSTRAINT events_like_count CHECK (like_count IS NULL OR like_count >= 0),
    ADD CONSTRAINT events_post_id_present CHECK ((kind IN ('userCreated', 'userDeleted')) = (post_id IS NULL)),
    ADD CONSTRAINT events_like_count_present CHECK ((kind IN ('liked', 'unliked')) = (like_count IS NOT NULL)),
    ADD CONSTRAINT events_user_deleted_names_nobody CHECK (kind <> 'userDeleted' OR user_id = '');

-- Append-only, but for the scrub of an erased user: `user_id` set to '' and every other column unchanged.
CREATE OR REPLACE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.user_id = '' AND NEW.seq = OLD.seq AND NEW.kind = OLD.kind AND NEW.post_id IS NOT DISTINCT FROM OLD.post_id
       AND NEW.like_count IS NOT DISTINCT FROM OLD.like_count AND NEW.at = OLD.at THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'the event log is append-only';
END;
$$;

-- The ids of deleted posts: a deleted post's id is never created again, a like on it is refused as on an unknown
-- post, and deleting it again changes nothing. Times are milliseconds since 1970-01-01 UTC.
CREATE TABLE deleted_posts (
    id         TEXT COLLATE "C" PRIMARY KEY CHECK (char_length(id) BETWEEN 1 AND 64),
    deleted_at BIGINT NOT NULL
);
