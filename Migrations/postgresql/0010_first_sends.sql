-- FeedSync schema for PostgreSQL, version 10: a like batch sent for the first time records its lane without reading
-- it first (Docs/decisions/0025-postgresql-a-first-send-skips-the-lane-check.md).
--
-- `feedsync_apply_likes_once` reads the lane before it applies anything, so that a batch sent again answers from the
-- lane; then it records the lane with an upsert. Only a batch sent again can find itself on its lane, and the sender
-- knows which sends are first sends: on a busy server the read and the upsert cost about a sixth of a like's backend
-- CPU. `feedsync_apply_likes_first_send` applies the batch, then moves its lane forward with a plain update, or
-- creates the lane. A lane already at this batch or beyond fails the statement with FSB02, its work undone; sent
-- again through `feedsync_apply_likes_once`, the batch answers from the lane. A sender never sends a batch a second
-- time through this function.

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
        INSERT INTO like_lanes (lane, batch, results, updated_at) VALUES (lane_id, batch_number, fresh, now_ms)
        ON CONFLICT (lane) DO NOTHING;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'like batch % of lane % was committed meanwhile', batch_number, lane_id
                USING ERRCODE = 'FSB02';
        END IF;
        -- A new lane: lanes idle for a day go, as in feedsync_apply_likes_once.
        DELETE FROM like_lanes WHERE updated_at < now_ms - 86400000;
    END IF;
    RETURN fresh;
END;
$$;
