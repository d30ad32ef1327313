-- FeedSync schema for PostgreSQL, version 10: a like batch sent for the first time records its lane without reading
-- it first (Docs/decisions/0025-postgresql-a-first-send-skips-the-lane-check.md).
--
-- Only a batch sent again can find itself on its lane, and the sender knows which sends are first sends: on a busy
-- server the lane's read before the batch and its upsert after it cost about a sixth of a like's backend CPU.
--   * `feedsync_apply_likes_first_send` applies the batch, then moves its lane forward with a plain update, or creates
--     the lane. A lane already at this batch or beyond fails the statement with FSB02, its work undone; sent again
--     through `feedsync_apply_likes_once`, the batch answers from the lane.
--   * `feedsync_apply_likes_once` keeps its signature and its promise: it reads the lane, answers from it when the
--     batch is there, and otherwise applies and records the batch through `feedsync_apply_likes_first_send`, so a
--     lane is recorded one way only.

CREATE FUNCTION feedsync_apply_likes_first_send(
    lane_id uuid, batch_number bigint, units integer[], actions text[], user_ids text[], post_ids text[], ats bigint[]
)
RETURNS feedsync_like_result[]
LANGUAGE plpgsql AS $$
DECLARE
    fresh feedsync_like_result[];
    now_ms bigint;
BEGIN
    fresh := feedsync_like_results(units, actions, user_ids, post_ids, ats);
    now_ms := (extract(epoch FROM now()) * 1000)::bigint;
    UPDATE like_lanes l SET batch = batch_number, results = fresh, updated_at = now_ms
    WHERE l.lane = lane_id AND l.batch < batch_number;
    IF NOT FOUND THEN
        -- A new lane, or one another send of this batch (or a later one) moved on meanwhile: that send's row wins.
        INSERT INTO like_lanes (lane, batch, results, updated_at) VALUES (lane_id, batch_number, fresh, now_ms)
        ON CONFLICT (lane) DO NOTHING;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'like batch % of lane % was committed meanwhile', batch_number, lane_id
                USING ERRCODE = 'FSB02';
        END IF;
        -- A new lane: lanes idle for a day go.
        DELETE FROM like_lanes WHERE updated_at < now_ms - 86400000;
    END IF;
    RETURN fresh;
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
    known boolean;
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
    RETURN QUERY SELECT * FROM unnest(
        feedsync_apply_likes_first_send(lane_id, batch_number, units, actions, user_ids, post_ids, ats));
END;
$$;
