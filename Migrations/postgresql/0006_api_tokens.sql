-- FeedSync schema for PostgreSQL, version 6: API tokens for `feedsync serve` (Docs/CLI.md, "Tokens").
--
-- The same table as Migrations/sqlite/0005_api_tokens.sql. A token's text is `fst_<id>_<secret>`; only the SHA-256
-- of the whole text is stored (as 64 lowercase hex digits), so the table never holds anything that authenticates.
-- `id` is public: `token list` and `token revoke` name a token by it. Each HTTP request looks its token up by hash
-- through the unique index, so a revocation (`revoked_at` set) takes effect on the next request of every server
-- process. Times are milliseconds since 1970-01-01 UTC.
CREATE TABLE api_tokens (
    id         TEXT COLLATE "C" PRIMARY KEY CHECK (id ~ '^[0-9a-f]{12}$'),
    user_id    TEXT COLLATE "C" NOT NULL REFERENCES users (id),
    token_hash TEXT COLLATE "C" NOT NULL UNIQUE CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    label      TEXT NOT NULL DEFAULT '' CHECK (char_length(label) <= 200),
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
