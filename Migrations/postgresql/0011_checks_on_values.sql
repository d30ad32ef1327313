-- FeedSync schema for PostgreSQL, version 11: the checks a like's writes meet are made on the values, by domains
-- (Docs/decisions/0028-postgresql-checks-on-values.md).
--
-- A table's CHECK constraints are read from the catalog and planned again by every statement that writes a row of
-- it: on a busy server the likes, posts, users, events and event_log_head checks a like meets cost it about 20 µs of
-- backend CPU, a seventh of the like. A domain's checks are planned once per session (the type cache) and run only
-- when a value of the domain is written: a like count's update checks the count, not the post's id and body.
--   * Every rule is kept, on the same columns: ids, names, bodies, counts, seqs and the log's kinds and ids. The
--     log's rules that join two columns (which kinds name a post, carry a count, or name nobody) stay table checks.
--   * The domains are created empty, the columns moved onto them (the same base type and collation: no rewrite),
--     then the checks added, which reads each column once to validate it.
--   * A value a domain refuses fails with SQLSTATE 23514, naming the domain's check (`feedsync_user_name_check`).

CREATE DOMAIN feedsync_id AS text COLLATE "C";
CREATE DOMAIN feedsync_count AS bigint;
CREATE DOMAIN feedsync_seq AS bigint;
CREATE DOMAIN feedsync_user_name AS text;
CREATE DOMAIN feedsync_post_text AS text;
CREATE DOMAIN feedsync_event_kind AS text COLLATE "C";
CREATE DOMAIN feedsync_event_user AS text COLLATE "C";
CREATE DOMAIN feedsync_event_post AS text COLLATE "C";
CREATE DOMAIN feedsync_only_row AS integer;

ALTER TABLE users
    DROP CONSTRAINT users_id_check, DROP CONSTRAINT users_name_check, DROP CONSTRAINT users_like_count_check,
    ALTER COLUMN id TYPE feedsync_id COLLATE "C",
    ALTER COLUMN name TYPE feedsync_user_name,
    ALTER COLUMN like_count TYPE feedsync_count;

ALTER TABLE posts
    DROP CONSTRAINT posts_id_check, DROP CONSTRAINT posts_body_check, DROP CONSTRAINT posts_like_count_check,
    ALTER COLUMN id TYPE feedsync_id COLLATE "C",
    ALTER COLUMN body TYPE feedsync_post_text,
    ALTER COLUMN like_count TYPE feedsync_count;

ALTER TABLE events
    DROP CONSTRAINT events_seq_positive, DROP CONSTRAINT events_kind, DROP CONSTRAINT events_user_id_length,
    DROP CONSTRAINT events_post_id_length, DROP CONSTRAINT events_like_count,
    ALTER COLUMN seq TYPE feedsync_seq,
    ALTER COLUMN kind TYPE feedsync_event_kind COLLATE "C",
    ALTER COLUMN user_id TYPE feedsync_event_user COLLATE "C",
    ALTER COLUMN post_id TYPE feedsync_event_post COLLATE "C",
    ALTER COLUMN like_count TYPE feedsync_count;

ALTER TABLE event_log_head
    DROP CONSTRAINT event_log_head_id_check, DROP CONSTRAINT event_log_head_last_seq_check,
    ALTER COLUMN id TYPE feedsync_only_row,
    ALTER COLUMN last_seq TYPE feedsync_count;

ALTER DOMAIN feedsync_id ADD CONSTRAINT feedsync_id_check CHECK (VALUE ~ '^[A-Za-z0-9_.:@-]{1,64}$');
ALTER DOMAIN feedsync_count ADD CONSTRAINT feedsync_count_check CHECK (VALUE >= 0);
ALTER DOMAIN feedsync_seq ADD CONSTRAINT feedsync_seq_check CHECK (VALUE > 0);
ALTER DOMAIN feedsync_user_name ADD CONSTRAINT feedsync_user_name_check CHECK (char_length(VALUE) <= 200);
ALTER DOMAIN feedsync_post_text ADD CONSTRAINT feedsync_post_text_check CHECK (char_length(VALUE) BETWEEN 1 AND 10000);
ALTER DOMAIN feedsync_event_kind ADD CONSTRAINT feedsync_event_kind_check
    CHECK (VALUE IN ('liked', 'unliked', 'postCreated', 'userCreated', 'postDeleted', 'userDeleted'));
-- A log's user is '' once erased.
ALTER DOMAIN feedsync_event_user ADD CONSTRAINT feedsync_event_user_check CHECK (char_length(VALUE) <= 64);
ALTER DOMAIN feedsync_event_post ADD CONSTRAINT feedsync_event_post_check CHECK (char_length(VALUE) BETWEEN 1 AND 64);
ALTER DOMAIN feedsync_only_row ADD CONSTRAINT feedsync_only_row_check CHECK (VALUE = 1);
