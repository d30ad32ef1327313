-- FeedSync schema, version 5: API tokens for `feedsync serve` (Docs/CLI.md, "Tokens").
--
-- A token's text is `fst_<id>_<secret>`; only the SHA-256 of the whole text is stored (as 64 lowercase hex digits),
-- so the table never holds anything that authenticates. `id` is public: `token list` and `token revoke` name a token
-- by it. Each HTTP request looks its token up by hash through the unique index, so a revocation (`revoked_at` set)
-- takes effect on the next request of every server process. Times are milliseconds since 1970-01-01 UTC.
CREATE TABLE api_tokens (
    id         TEXT    PRIMARY KEY NOT NULL CHECK (length(id) = 12 AND id NOT GLOB '*[^0-9a-f]*'),
    user_id    TEXT    NOT NULL REFERENCES users (id),
    token_hash TEXT    NOT NULL UNIQUE CHECK (length(token_hash) = 64 AND token_hash NOT GLOB '*[^0-9a-f]*'),
    label      TEXT    NOT NULL DEFAULT '' CHECK (length(label) <= 200),
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) WITHOUT ROWID;
