-- FeedSync schema for PostgreSQL, version 8: a like batch in one lean PL/pgSQL function.
--
-- Versions 3, 4 and 7 ran a batch through four layers — the lane function calling the batch function through
-- `SELECT array_agg(…) FROM …`, which called the version-3 batch, which called a unit function once per unit, each unit
-- of a batch of several in a subtransaction — and a lone like cost the server 1.6× the CPU of pgbench's toggle
-- (Docs/decisions/0019-postgresql-likes-cost-what-a-toggle-costs.md). `feedsync_like_results` does the same work in one
-- function and returns its answer as an array, by value:
--   * the lock order is unchanged: posts in post_key order, then users in user_key order, then likes, then
--     `event_log_head`, last. A lone command locks its post as it reads it; its user's row is locked by the count
--     trigger after the like — it holds one post, so no batch holding that post can be waiting for it;
--   * a unit's ids are all looked up before it changes anything, so an unknown user or post fails the unit without a
--     subtransaction: the unit's result with several units, the statement's error with one;
--   * the like-count triggers still keep `posts.like_count` and `users.like_count` for any writer.
--
-- `feedsync_apply_likes_once` keeps its signature and its promise (a batch sent twice applies once) for less: it reads
-- the lane without locking it, applies the batch, then records the lane with one upsert that only moves a lane
-- forward. A second send that ran while the first was still running finds the lane moved when it records and fails
-- with FSB02 (its work undone); sent again, it answers from the lane, as before.

DROP FUNCTION feedsync_apply_likes(integer[], text[], text[], text[], bigint[]);
DROP FUNCTION feedsync_apply_likes_v3(integer[], text[], text[], text[], bigint[]);
DROP FUNCTION feedsync_like_unit(text[], text[], text[], bigint);

-- A batch, in the caller's transaction: command i belongs to unit units[i] (consecutive commands of one unit share a
-- number); ats[i] is its unit's time in milliseconds. One result per command, in order: its unit's failure
-- (SQLSTATE and message), or whether the user likes the post afterwards, the post's like count afterwards, whether
-- anything changed and, when it did, its event's seq.
--
-- A unit fails only for an unknown user (FSU01) or post (FSP01), with the id as message: every command's ids are
-- looked up before the unit changes anything, so a failing unit changes nothing and needs no subtransaction. With one
-- unit the failure is raised (it fails the statement); with several it is the unit's result. Anything else raised
-- fails the statement (a serialization failure or deadlock, which the caller retries; or an unexpected error, after
-- which the caller runs the units one by one).
CREATE FUNCTION feedsync_like_results(units integer[], actions text[], user_ids text[], post_ids text[], ats bigint[])
RETURNS feedsync_like_result[]
LANGUAGE plpgsql AS $$
DECLARE
    total integer := coalesce(array_length(actions, 1), 0);
    several boolean;
    first_k integer := 1;
    last_k integer;
    k integer;
    n bigint;
    uks bigint[] := '{}';
    pks bigint[] := '{}';
    uk bigint;
    pk bigint;
    code text;
    message text;
    act text;
    did boolean;
    now_liked boolean;
    cnt bigint;
    answer feedsync_like_result[] := '{}';
    -- Per command, its event's number within the batch (NULL: no event).
    event_of integer[] := '{}';
    e_kind text[] := '{}';
    e_user text[] := '{}';
    e_post text[] := '{}';
    e_count bigint[] := '{}';
    e_at bigint[] := '{}';
    base bigint := 0;
BEGIN
    IF total = 0 THEN
        RETURN answer;
    END IF;
    several := units[1] <> units[total];
    IF total > 1 THEN
        -- 1. The posts, then the users, in key order, before any like. (A lone command locks its post as it reads it
        -- below; its user's row is locked by the count trigger after the like.)
        PERFORM 1 FROM posts p WHERE p.id = ANY (post_ids) ORDER BY p.post_key FOR NO KEY UPDATE;
        PERFORM 1 FROM users u WHERE u.id = ANY (user_ids) ORDER BY u.user_key FOR NO KEY UPDATE;
    END IF;
    -- 2. The units, each looked up whole before it changes anything.
    WHILE first_k <= total LOOP
        last_k := first_k;
        WHILE last_k < total AND units[last_k + 1] = units[first_k] LOOP
            last_k := last_k + 1;
        END LOOP;
        code := NULL;
        FOR k IN first_k .. last_k LOOP
            SELECT p.post_key INTO pk FROM posts p WHERE p.id = post_ids[k] FOR NO KEY UPDATE;
            SELECT u.user_key INTO uk FROM users u WHERE u.id = user_ids[k];
            IF uk IS NULL THEN
                code := 'FSU01';
                message := user_ids[k];
            ELSIF pk IS NULL THEN
                code := 'FSP01';
                message := post_ids[k];
            END IF;
            IF code IS NOT NULL THEN
                IF NOT several THEN
                    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message;
                END IF;
                EXIT;
            END IF;
            uks[k] := uk;
            pks[k] := pk;
        END LOOP;
        FOR k IN first_k .. last_k LOOP
            IF code IS NOT NULL THEN
                answer := answer || ROW(code, message, NULL, NULL, NULL, NULL)::feedsync_like_result;
                event_of := event_of || NULL::integer;
                CONTINUE;
            END IF;
            act := actions[k];
            did := false;
            now_liked := false;
            IF act <> 'like' THEN
                DELETE FROM likes l WHERE l.user_key = uks[k] AND l.post_key = pks[k];
                GET DIAGNOSTICS n = ROW_COUNT;
                did := n > 0;
            END IF;
            IF act = 'like' OR (act = 'toggle' AND NOT did) THEN
                INSERT INTO likes (user_key, post_key, created_at) VALUES (uks[k], pks[k], ats[k]) ON CONFLICT DO NOTHING;
                GET DIAGNOSTICS n = ROW_COUNT;
                IF act = 'toggle' AND n = 0 THEN
                    -- Not there to delete, yet not insertable: a writer outside the post-first lock order changed
                    -- the like meanwhile. Retrying the transaction sees its commit.
                    RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'a like changed under a toggle';
                END IF;
                did := n > 0;
                now_liked := true;
            END IF;
            -- The count after the count trigger, from the row this transaction holds locked.
            SELECT p.like_count INTO cnt FROM posts p WHERE p.post_key = pks[k];
            answer := answer || ROW(NULL, NULL, now_liked, cnt, did, NULL)::feedsync_like_result;
            IF did THEN
                e_kind := e_kind || CASE WHEN now_liked THEN 'liked' ELSE 'unliked' END;
                e_user := e_user || user_ids[k];
                e_post := e_post || post_ids[k];
                e_count := e_count || cnt;
                e_at := e_at || ats[k];
                event_of := event_of || coalesce(array_length(e_kind, 1), 0);
            ELSE
                event_of := event_of || NULL::integer;
            END IF;
        END LOOP;
        first_k := last_k + 1;
    END LOOP;
    -- 3. The log, last: every event of the batch, consecutive seqs in command order.
    n := coalesce(array_length(e_kind, 1), 0);
    IF n = 0 THEN
        RETURN answer;
    END IF;
    UPDATE event_log_head SET last_seq = last_seq + n WHERE id = 1 RETURNING last_seq - n INTO base;
    IF base IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'P0002', MESSAGE = 'the event_log_head row is missing';
    END IF;
    IF n = 1 THEN
        INSERT INTO events (seq, kind, user_id, post_id, like_count, at)
        VALUES (base + 1, e_kind[1], e_user[1], e_post[1], e_count[1], e_at[1]);
    ELSE
        INSERT INTO events (seq, kind, user_id, post_id, like_count, at)
        SELECT base + d.i, d.kind, d.user_id, d.post_id, d.like_count, d.at
        FROM unnest(e_kind, e_user, e_post, e_count, e_at) WITH ORDINALITY AS d(kind, user_id, post_id, like_count, at, i);
    END IF;
    FOR k IN 1 .. total LOOP
        IF event_of[k] IS NOT NULL THEN
            answer[k].seq := base + event_of[k];
        END IF;
    END LOOP;
    RETURN answer;
END;
$$;

CREATE OR REPLACE FUNCTION feedsync_apply_likes_once(
    lane_id uuid, batch_number bigint, units integer[], actions text[], user_ids text[], post_ids text[], ats bigint[]
)
RETURNS SETOF feedsync_like_result
LANGUAGE plpgsql AS $$
DECLARE
    last_batch bigint;
    stored feedsync_like_result[];
    fresh feedsync_like_result[];
    known boolean;
    now_ms bigint;
BEGIN
    SELECT l.batch, l.results INTO last_batch, stored FROM like_lanes l WHERE l.lane = lane_id;
    known := FOUND;
    IF known AND last_batch = batch_number THEN
        RETURN QUERY SELECT * FROM unnest(stored);
        RETURN;
    END IF;
    IF known AND last_batch > batch_number THEN
        RAISE EXCEPTION 'like batch % of lane % comes after batch %', batch_number, lane_id, last_batch
            USING ERRCODE = 'FSB01';
    END IF;
    fresh := feedsync_like_results(units, actions, user_ids, post_ids, ats);
    now_ms := (extract(epoch FROM now()) * 1000)::bigint;
    INSERT INTO like_lanes AS l (lane, batch, results, updated_at) VALUES (lane_id, batch_number, fresh, now_ms)
    ON CONFLICT (lane) DO UPDATE SET batch = excluded.batch, results = excluded.results, updated_at = excluded.updated_at
    WHERE l.batch < excluded.batch;
    IF NOT FOUND THEN
        -- Another send of this batch (or a later one) recorded the lane while this one ran: undo this one; sent
        -- again, it answers from the lane.
        RAISE EXCEPTION 'like batch % of lane % was committed meanwhile', batch_number, lane_id
            USING ERRCODE = 'FSB02';
    END IF;
    IF NOT known THEN
        DELETE FROM like_lanes WHERE updated_at < now_ms - 86400000;
    END IF;
    RETURN QUERY SELECT * FROM unnest(fresh);
END;
$$;
