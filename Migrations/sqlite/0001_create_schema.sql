-- FeedSync schema, version 1: users, posts, likes, the event log and durable subscriber cursors.
--
-- Text ids (`user1`, `post1`) are what callers see; each row also has an integer key that the likes table
-- references, so its primary key stays small. Times are milliseconds since 1970-01-01 UTC.

CREATE TABLE users (
    user_key   INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE
               CHECK (length(id) BETWEEN 1 AND 64 AND id NOT GLOB '*[^A-Za-z0-9_.:@-]*'),
    name       TEXT    NOT NULL DEFAULT '' CHECK (length(name) <= 200),
    created_at INTEGER NOT NULL
);

CREATE TABLE posts (
    post_key   INTEGER PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE
               CHECK (length(id) BETWEEN 1 AND 64 AND id NOT GLOB '*[^A-Za-z0-9_.:@-]*'),
    author_id  TEXT    NOT NULL REFERENCES users (id),
    body       TEXT    NOT NULL CHECK (length(body) BETWEEN 1 AND 10000),
    created_at INTEGER NOT NULL,
    -- Written only by the likes triggers below, so it always equals the number of like rows of the post (code never
    -- updates it; `feedsync check` verifies it).
    like_count INTEGER NOT NULL DEFAULT 0 CHECK (like_count >= 0)
);

CREATE INDEX posts_author ON posts (author_id);

-- The feed page: newest first, ties broken by insertion order (the integer key). Keyset pagination seeks into it.
CREATE INDEX posts_feed ON posts (created_at DESC, post_key DESC);

CREATE TABLE likes (
    user_key   INTEGER NOT NULL REFERENCES users (user_key),
    post_key   INTEGER NOT NULL REFERENCES posts (post_key),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (user_key, post_key)
) WITHOUT ROWID;

-- Foreign-key checks, the like-count guard and `check` count a post's likes through this index.
CREATE INDEX likes_post ON likes (post_key);

CREATE TRIGGER likes_count_insert AFTER INSERT ON likes BEGIN
    UPDATE posts SET like_count = like_count + 1 WHERE post_key = NEW.post_key;
END;

CREATE TRIGGER likes_count_delete AFTER DELETE ON likes BEGIN
    UPDATE posts SET like_count = like_count - 1 WHERE post_key = OLD.post_key;
END;

-- The append-only event log. `seq` is the rowid: SQLite gives each new row max(seq) + 1, so with one writer at a time
-- (IMMEDIATE transactions) seqs are gap-free in commit order. Pruning never deletes the newest event, so max(seq)
-- never goes back and a seq is never reused. (AUTOINCREMENT would guarantee that too, at the cost of one more page
-- written per commit, for its sqlite_sequence row.)
CREATE TABLE events (
    seq        INTEGER PRIMARY KEY,
    -- OR chains, not IN lists: SQLite 3.40 evaluates a CHECK's IN list through a temporary table on every insert.
    kind       TEXT    NOT NULL CHECK (kind = 'liked' OR kind = 'unliked' OR kind = 'postCreated' OR kind = 'userCreated'),
    user_id    TEXT    NOT NULL CHECK (length(user_id) BETWEEN 1 AND 64),
    post_id    TEXT    CHECK (post_id IS NULL OR length(post_id) BETWEEN 1 AND 64),
    like_count INTEGER CHECK (like_count IS NULL OR like_count >= 0),
    at         INTEGER NOT NULL,
    CHECK ((kind = 'userCreated') = (post_id IS NULL)),
    CHECK ((kind = 'liked' OR kind = 'unliked') = (like_count IS NOT NULL))
);

CREATE TRIGGER events_append_only BEFORE UPDATE ON events BEGIN
    SELECT RAISE(ABORT, 'the event log is append-only');
END;

-- A durable subscriber's position in the log: the last seq it applied.
CREATE TABLE subscriber_cursors (
    name       TEXT    PRIMARY KEY NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    last_seq   INTEGER NOT NULL CHECK (last_seq >= 0),
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- One row describing the log as a whole.
CREATE TABLE log_state (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    -- The highest seq removed by pruning; 0 while the log is complete.
    pruned_through INTEGER NOT NULL DEFAULT 0 CHECK (pruned_through >= 0),
    -- 1 once rows were bulk-loaded without events (seeding): replaying the log no longer rebuilds the likes table.
    bulk_loaded    INTEGER NOT NULL DEFAULT 0 CHECK (bulk_loaded = 0 OR bulk_loaded = 1)
);

INSERT INTO log_state (id) VALUES (1);
