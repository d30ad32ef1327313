-- FeedSync schema, version 4: sync between a source database and its replicas (Docs/Replicas.md).
--
-- The event log gains the kind `likeCountChanged`: on a replica, a post's count changed by likes of other users,
-- whose ids a replica never receives (its `user_id` is empty). SQLite cannot change a CHECK constraint in place, so
-- the log is copied into a table with the new constraints; seqs and rows are kept as they are.
CREATE TABLE events_v4 (
    seq        INTEGER PRIMARY KEY,
    kind       TEXT    NOT NULL CHECK (kind = 'liked' OR kind = 'unliked' OR kind = 'postCreated' OR kind = 'userCreated'
                                      OR kind = 'likeCountChanged'),
    user_id    TEXT    NOT NULL CHECK (length(user_id) <= 64),
    post_id    TEXT    CHECK (post_id IS NULL OR length(post_id) BETWEEN 1 AND 64),
    like_count INTEGER CHECK (like_count IS NULL OR like_count >= 0),
    at         INTEGER NOT NULL,
    CHECK ((kind = 'userCreated') = (post_id IS NULL)),
    CHECK ((kind = 'liked' OR kind = 'unliked' OR kind = 'likeCountChanged') = (like_count IS NOT NULL)),
    CHECK ((kind = 'likeCountChanged') = (user_id = ''))
);

INSERT INTO events_v4 (seq, kind, user_id, post_id, like_count, at)
SELECT seq, kind, user_id, post_id, like_count, at FROM events;

DROP TABLE events;
ALTER TABLE events_v4 RENAME TO events;

CREATE TRIGGER events_append_only BEFORE UPDATE ON events BEGIN
    SELECT RAISE(ABORT, 'the event log is append-only');
END;

-- The source's side: per replica client, the last mutation number it applied, recorded in the transaction that
-- applied it, and the log's last seq at that commit (a pull confirms the number only to a replica whose state
-- reaches that seq). A client id belongs to one user for good.
CREATE TABLE sync_clients (
    client_id         TEXT    PRIMARY KEY NOT NULL CHECK (length(client_id) BETWEEN 1 AND 64),
    user_id           TEXT    NOT NULL CHECK (length(user_id) BETWEEN 1 AND 64),
    last_mutation     INTEGER NOT NULL DEFAULT 0 CHECK (last_mutation >= 0),
    last_mutation_seq INTEGER NOT NULL DEFAULT 0 CHECK (last_mutation_seq >= 0),
    updated_at        INTEGER NOT NULL
) WITHOUT ROWID;

-- Mutations the source refused for good (an unknown post, a post id taken): reported on every push that names them.
CREATE TABLE sync_rejections (
    client_id TEXT    NOT NULL,
    mutation  INTEGER NOT NULL CHECK (mutation > 0),
    reason    TEXT    NOT NULL,
    at        INTEGER NOT NULL,
    PRIMARY KEY (client_id, mutation)
) WITHOUT ROWID;

-- The replica's side. One row when this database is a replica: where it syncs from, as whom, and how far.
CREATE TABLE replica_state (
    id                INTEGER PRIMARY KEY CHECK (id = 1),
    source            TEXT    NOT NULL,
    user_id           TEXT    NOT NULL CHECK (length(user_id) BETWEEN 1 AND 64),
    client_id         TEXT    NOT NULL CHECK (length(client_id) BETWEEN 1 AND 64),
    -- The source's seq this replica's state reflects, and the source's bulk-load generation it includes.
    synced_seq        INTEGER NOT NULL DEFAULT 0 CHECK (synced_seq >= 0),
    bulk_generation   INTEGER NOT NULL DEFAULT 0 CHECK (bulk_generation >= 0),
    -- The highest mutation number the source acknowledged (applied or rejected): later pushes start after it.
    pushed_through    INTEGER NOT NULL DEFAULT 0 CHECK (pushed_through >= 0),
    last_sync_at      INTEGER,
    last_error        TEXT
);

-- Local writes not yet confirmed by a pull, as intent: `like` sets liked, `unlike` clears it, `post` creates a post.
-- AUTOINCREMENT: a number is never reused, even after the rows before it left the queue.
CREATE TABLE replica_mutations (
    number   INTEGER PRIMARY KEY AUTOINCREMENT,
    kind     TEXT    NOT NULL CHECK (kind = 'like' OR kind = 'unlike' OR kind = 'post'),
    post_id  TEXT    NOT NULL,
    body     TEXT,
    at       INTEGER NOT NULL,
    -- NULL while pending; the source's reason once it refused the mutation.
    rejected TEXT
);

CREATE INDEX replica_mutations_post ON replica_mutations (post_id);

-- For each post with a pending like or unlike: the state the source last confirmed (the tables show it with the
-- pending intent on top).
CREATE TABLE replica_base (
    post_id    TEXT    PRIMARY KEY NOT NULL,
    liked      INTEGER NOT NULL CHECK (liked = 0 OR liked = 1),
    like_count INTEGER NOT NULL CHECK (like_count >= 0)
) WITHOUT ROWID;
