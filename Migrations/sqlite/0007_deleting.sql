-- FeedSync schema, version 7: deleting posts and erasing users (Docs/decisions/0022-deleting.md).
--
-- The event log gains the kinds `postDeleted` and `userDeleted`. Erasing a user sets `user_id` to '' on every event
-- that named them, keeping seq, kind, post, count and time, so no cursor becomes invalid and no follower sees a gap:
-- the append-only guard lets exactly that update through. An empty `user_id` therefore no longer means only
-- `likeCountChanged`. SQLite cannot change a CHECK constraint in place, so the log is copied into a table with the
-- new constraints; seqs and rows are kept as they are.
CREATE TABLE events_v7 (
    seq        INTEGER PRIMARY KEY,
    kind       TEXT    NOT NULL CHECK (kind = 'liked' OR kind = 'unliked' OR kind = 'postCreated' OR kind = 'userCreated'
                                      OR kind = 'likeCountChanged' OR kind = 'postDeleted' OR kind = 'userDeleted'),
    user_id    TEXT    NOT NULL CHECK (length(user_id) <= 64),
    post_id    TEXT    CHECK (post_id IS NULL OR length(post_id) BETWEEN 1 AND 64),
    like_count INTEGER CHECK (like_count IS NULL OR like_count >= 0),
    at         INTEGER NOT NULL,
    CHECK ((kind = 'userCreated' OR kind = 'userDeleted') = (post_id IS NULL)),
    CHECK ((kind = 'liked' OR kind = 'unliked' OR kind = 'likeCountChanged') = (like_count IS NOT NULL)),
    CHECK ((kind <> 'likeCountChanged' AND kind <> 'userDeleted') OR user_id = '')
);

INSERT INTO events_v7 (seq, kind, user_id, post_id, like_count, at)
SELECT seq, kind, user_id, post_id, like_count, at FROM events;

DROP TABLE events;
ALTER TABLE events_v7 RENAME TO events;

-- Append-only, but for the scrub of an erased user: `user_id` set to '' and every other column unchanged.
CREATE TRIGGER events_append_only BEFORE UPDATE ON events
WHEN NOT (NEW.user_id = '' AND NEW.seq = OLD.seq AND NEW.kind = OLD.kind AND NEW.post_id IS OLD.post_id
          AND NEW.like_count IS OLD.like_count AND NEW.at = OLD.at)
BEGIN
    SELECT RAISE(ABORT, 'the event log is append-only');
END;

-- The ids of deleted posts: a deleted post's id is never created again, a like on it is refused as on an unknown
-- post, and deleting it again changes nothing. Times are milliseconds since 1970-01-01 UTC.
CREATE TABLE deleted_posts (
    id         TEXT    PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 64),
    deleted_at INTEGER NOT NULL
) WITHOUT ROWID;

-- A counter every deletion moves. A process caches the integer keys of users and posts for its like commands, and
-- SQLite may give a deleted row's key to the next row inserted; a process that finds the counter moved since it last
-- looked drops its cache, so it never uses a key of a row that another process deleted.
CREATE TABLE deletions (
    epoch INTEGER NOT NULL
);
INSERT INTO deletions (epoch) VALUES (0);
