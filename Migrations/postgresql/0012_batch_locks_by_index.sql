-- FeedSync schema for PostgreSQL, version 12: a like batch reaches the rows it locks through their indexes
-- (Docs/decisions/0029-postgresql-batch-locks-by-index.md).
--
-- A batch of several commands locked its posts and users in key order with `WHERE id = ANY (ids) ORDER BY key FOR NO
-- KEY UPDATE`, then read each command's keys again, one statement each. The function's cached generic plans cannot
-- see how many ids the array holds: they read the users table whole (a sequential scan of every user to lock two) and
-- the posts through a bitmap. Now one statement reads every command's keys, each through its id's index, and sorts
-- them; two more lock the posts, then the users, one row per key through the key's index, in key order. The lock order
-- (posts in post_key order, then users in user_key order, then likes, then `event_log_head`), the results and the
-- failures are unchanged; a lone command still locks its post as it reads it.

CREATE OR REPLACE FUNCTION feedsync_like_results(units integer[], actions text[], user_ids text[], post_ids text[], ats bigint[])
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
    -- 1. Every command's keys, each read through its id's index. A lone command locks its post as it reads it; its
    -- user's row is locked by the count trigger after the like. A batch of several then locks its posts, then its
    -- users, in key order before any like, each reached through its key's index. A row gone between the read and its
    -- lock (a post taken down, a user erased) fails the statement as a serialization failure; retried, the read finds
    -- the id unknown.
    IF total = 1 THEN
        SELECT p.post_key INTO pk FROM posts p WHERE p.id = post_ids[1] FOR NO KEY UPDATE;
        SELECT u.user_key INTO uk FROM users u WHERE u.id = user_ids[1];
        pks[1] := pk;
        uks[1] := uk;
    ELSE
        FOR k IN 1 .. total LOOP
            SELECT p.post_key INTO pk FROM posts p WHERE p.id = post_ids[k];
            SELECT u.user_key INTO uk FROM users u WHERE u.id = user_ids[k];
            pks[k] := pk;
            uks[k] := uk;
        END LOOP;
        -- Per table, the keys the batch names that no longer have a row (none, unless one was deleted meanwhile).
        SELECT count(*) - count(l.locked) INTO n
        FROM unnest(ARRAY(SELECT DISTINCT x.key FROM unnest(pks) AS x(key) WHERE x.key IS NOT NULL ORDER BY x.key)) AS s(key)
        LEFT JOIN LATERAL (SELECT true AS locked FROM posts p WHERE p.post_key = s.key FOR NO KEY UPDATE) AS l ON true;
        IF n > 0 THEN
            RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'a post of the like batch was deleted as it was locked';
        END IF;
        SELECT count(*) - count(l.locked) INTO n
        FROM unnest(ARRAY(SELECT DISTINCT x.key FROM unnest(uks) AS x(key) WHERE x.key IS NOT NULL ORDER BY x.key)) AS s(key)
        LEFT JOIN LATERAL (SELECT true AS locked FROM users u WHERE u.user_key = s.key FOR NO KEY UPDATE) AS l ON true;
        IF n > 0 THEN
            RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = 'a user of the like batch was deleted as it was locked';
        END IF;
    END IF;
    -- 2. The units, each checked whole before it changes anything.
    WHILE first_k <= total LOOP
        last_k := first_k;
        WHILE last_k < total AND units[last_k + 1] = units[first_k] LOOP
            last_k := last_k + 1;
        END LOOP;
        code := NULL;
        FOR k IN first_k .. last_k LOOP
            IF uks[k] IS NULL THEN
                code := 'FSU01';
                message := user_ids[k];
            ELSIF pks[k] IS NULL THEN
                code := 'FSP01';
                message := post_ids[k];
            END IF;
            IF code IS NOT NULL THEN
                IF NOT several THEN
                    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message;
                END IF;
                EXIT;
            END IF;
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
