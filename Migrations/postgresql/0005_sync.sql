-- FeedSync schema for PostgreSQL, version 5: a PostgreSQL database as the source of replicas (Docs/Replicas.md).
--
-- Per replica client, the last mutation number the source applied, recorded in the transaction that applied it, and
-- the log's last seq at that commit (a pull confirms the number only to a replica whose state reaches that seq). A
-- client id belongs to one user for good.
CREATE TABLE sync_clients (
    client_id         TEXT COLLATE "C" PRIMARY KEY CHECK (char_length(client_id) BETWEEN 1 AND 64),
    user_id           TEXT COLLATE "C" NOT NULL CHECK (char_length(user_id) BETWEEN 1 AND 64),
    last_mutation     BIGINT NOT NULL DEFAULT 0 CHECK (last_mutation >= 0),
    last_mutation_seq BIGINT NOT NULL DEFAULT 0 CHECK (last_mutation_seq >= 0),
    updated_at        BIGINT NOT NULL
);

-- Mutations the source refused for good (an unknown post, a post id taken): reported on every push that names them.
CREATE TABLE sync_rejections (
    client_id TEXT COLLATE "C" NOT NULL,
    mutation  BIGINT NOT NULL CHECK (mutation > 0),
    reason    TEXT NOT NULL,
    at        BIGINT NOT NULL,
    PRIMARY KEY (client_id, mutation)
);

-- A replica is a SQLite file; on PostgreSQL this table exists so that every FeedSync database answers "is this a
-- replica?" the same way, and it stays empty.
CREATE TABLE replica_state (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    source    TEXT NOT NULL,
    user_id   TEXT NOT NULL,
    client_id TEXT NOT NULL
);
