-- FeedSync schema for PostgreSQL, version 3: like commands applied by the server, a batch in one statement.
--
-- feedsync_apply_likes runs one batch of the domain's group commit — several callers' units of like, unlike and
-- toggle commands — inside the calling transaction, in one round trip instead of four to six per command, and in
-- the lock order every like-writing transaction keeps, so that two batches never deadlock on each other:
--   1. the rows of every post the batch names, in post_key order (FOR NO KEY UPDATE): batches touching one post
--      take turns on it before either touches any of its likes;
--   2. the likes, unit by unit — each unit, when there are several, in a subtransaction, so that a failing unit
--      (an unknown user or post) is undone alone and fails only its caller;
--   3. last, the event_log_head row, for all the batch's events at once (dense seqs in commit order; the head is
--      the last lock a transaction takes, see Docs/Storage.md).
-- It returns one row per command, in order: the unit's failure (SQLSTATE and message), or the command's result and,
-- when it changed something, its event's seq. The SQLite backend runs the same steps statement by statement.

-- One unit's commands, in order: for each, whether the user likes the post afterwards, the post's like count
-- afterwards, and whether anything changed. An unknown user or post raises FSU01 / FSP01 with the id as message.
CREATE FUNCTION feedsync_like_unit(actions text[], user_ids text[], post_ids text[], at bigint)
RETURNS TABLE (out_liked boolean, out_like_count bigint, out_changed boolean)
LANGUAGE plpgsql AS $$
DECLARE
    k integer;
    uk bigint;
    pk bigint;
    n bigint;
BEGIN
    FOR k IN 1 .. coalesce(array_length(actions, 1), 0) LOOP
        SELECT u.user_key INTO uk FROM users u WHERE u.id = user_ids[k];
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'FSU01', MESSAGE = user_ids[k];
        END IF;
        SELECT p.post_key INTO pk FROM posts p WHERE p.id = post_ids[k];
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'FSP01', MESSAGE = post_ids[k];
        END IF;
        out_changed := false;
        out_liked := false;
        IF actions[k] = 'unlike' OR actions[k] = 'toggle' THEN
            DELETE FROM likes l WHERE l.user_key = uk AND l.post_key = pk;
            GET DIAGNOSTICS n = ROW_COUNT;
            out_changed := n > 0;
        END IF;
        IF actions[k] = 'like' OR (actions[k] = 'toggle' AND NOT out_changed) THEN
            INSERT INTO likes (user_key, post_key, created_at) VALUES (uk, pk, at) ON CONFLICT DO NOTHING;
            GET DIAGNOSTICS n = ROW_COUNT;
            IF actions[k] = 'toggle' AND n = 0 THEN
                -- Not there to delete, yet not insertable: a writer outside the post-first lock order changed the
                -- like meanwhile. Retrying the transaction sees its commit.
                RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'a like changed under a toggle';
            END IF;
            out_changed := n > 0;
            out_liked := true;
        END IF;
        SELECT p.like_count INTO out_like_count FROM posts p WHERE p.post_key = pk;
        RETURN NEXT;
    END LOOP;
END;
$$;

-- A batch: command i belongs to unit units[i] (consecutive commands of one unit share a number); ats[i] is its
-- unit's time in milliseconds.
CREATE FUNCTION feedsync_apply_likes(units integer[], actions text[], user_ids text[], post_ids text[], ats bigint[])
RETURNS TABLE (
    out_failed_code text, out_failed_message text, out_liked boolean, out_like_count bigint, out_changed boolean,
    out_seq bigint
)
LANGUAGE plpgsql AS $$
DECLARE
    total integer := coalesce(array_length(actions, 1), 0);
    several boolean;
    first_k integer := 1;
    last_k integer;
    k integer;
    j integer;
    r record;
    failed boolean;
    code text;
    message text;
    u_liked boolean[];
    u_count bigint[];
    u_changed boolean[];
    res_code text[] := '{}';
    res_message text[] := '{}';
    res_liked boolean[] := '{}';
    res_count bigint[] := '{}';
    res_changed boolean[] := '{}';
    res_draft integer[] := '{}';
    d_kind text[] := '{}';
    d_user text[] := '{}';
    d_post text[] := '{}';
    d_count bigint[] := '{}';
    d_at bigint[] := '{}';
    drafts integer;
    base bigint := 0;
BEGIN
    IF total = 0 THEN
        RETURN;
    END IF;
    several := units[1] <> units[total];
    -- 1. The posts first, in key order.
    PERFORM 1 FROM posts p WHERE p.id = ANY (post_ids) ORDER BY p.post_key FOR NO KEY UPDATE;
    -- 2. The units.
    WHILE first_k <= total LOOP
        last_k := first_k;
        WHILE last_k < total AND units[last_k + 1] = units[first_k] LOOP
            last_k := last_k + 1;
        END LOOP;
        failed := false;
        u_liked := '{}';
        u_count := '{}';
        u_changed := '{}';
        IF several THEN
            BEGIN
                FOR r IN SELECT * FROM feedsync_like_unit(
                    actions[first_k:last_k], user_ids[first_k:last_k], post_ids[first_k:last_k], ats[first_k])
                LOOP
                    u_liked := array_append(u_liked, r.out_liked);
                    u_count := array_append(u_count, r.out_like_count);
                    u_changed := array_append(u_changed, r.out_changed);
                END LOOP;
            EXCEPTION WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
                -- A serialization failure or deadlock fails the whole transaction, which the caller retries.
                IF left(code, 2) = '40' THEN
                    RAISE;
                END IF;
                failed := true;
            END;
        ELSE
            -- One unit: the transaction itself isolates it; a failure fails the statement.
            FOR r IN SELECT * FROM feedsync_like_unit(
                actions[first_k:last_k], user_ids[first_k:last_k], post_ids[first_k:last_k], ats[first_k])
            LOOP
                u_liked := array_append(u_liked, r.out_liked);
                u_count := array_append(u_count, r.out_like_count);
                u_changed := array_append(u_changed, r.out_changed);
            END LOOP;
        END IF;
        FOR k IN first_k .. last_k LOOP
            j := k - first_k + 1;
            IF failed THEN
                res_code := array_append(res_code, code);
                res_message := array_append(res_message, message);
                res_liked := array_append(res_liked, NULL::boolean);
                res_count := array_append(res_count, NULL::bigint);
                res_changed := array_append(res_changed, NULL::boolean);
                res_draft := array_append(res_draft, NULL::integer);
            ELSE
                res_code := array_append(res_code, NULL::text);
                res_message := array_append(res_message, NULL::text);
                res_liked := array_append(res_liked, u_liked[j]);
                res_count := array_append(res_count, u_count[j]);
                res_changed := array_append(res_changed, u_changed[j]);
                IF u_changed[j] THEN
                    d_kind := array_append(d_kind, CASE WHEN u_liked[j] THEN 'liked' ELSE 'unliked' END);
                    d_user := array_append(d_user, user_ids[k]);
                    d_post := array_append(d_post, post_ids[k]);
                    d_count := array_append(d_count, u_count[j]);
                    d_at := array_append(d_at, ats[k]);
                    res_draft := array_append(res_draft, array_length(d_kind, 1));
                ELSE
                    res_draft := array_append(res_draft, NULL::integer);
                END IF;
            END IF;
        END LOOP;
        first_k := last_k + 1;
    END LOOP;
    -- 3. The log, last: every event of the batch, consecutive seqs in command order.
    drafts := coalesce(array_length(d_kind, 1), 0);
    IF drafts > 0 THEN
        UPDATE event_log_head SET last_seq = last_seq + drafts WHERE id = 1 RETURNING last_seq - drafts INTO base;
        IF base IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = 'the event_log_head row is missing';
        END IF;
        INSERT INTO events (seq, kind, user_id, post_id, like_count, at)
        SELECT base + d.n, d.kind, d.user_id, d.post_id, d.like_count, d.at
        FROM unnest(d_kind, d_user, d_post, d_count, d_at) WITH ORDINALITY AS d(kind, user_id, post_id, like_count, at, n);
    END IF;
    FOR k IN 1 .. total LOOP
        out_failed_code := res_code[k];
        out_failed_message := res_message[k];
        out_liked := res_liked[k];
        out_like_count := res_count[k];
        out_changed := res_changed[k];
        out_seq := base + res_draft[k];
        RETURN NEXT;
    END LOOP;
END;
$$;
