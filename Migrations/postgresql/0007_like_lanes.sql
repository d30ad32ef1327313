-- FeedSync schema for PostgreSQL, version 7: like batches that may be sent twice and apply once.
--
-- A like batch is one statement in autocommit: one round trip (Docs/decisions/0005). A statement that got no answer
-- (the connection broke after it was sent) may or may not have committed, so the client sends it once more on a new
-- connection; this makes that repeat harmless. Each writer sends its batches on a lane — a random UUID of its own,
-- used by one batch at a time — numbered upwards. `like_lanes` holds each lane's last applied batch number and that
-- batch's result rows, written in the batch's own transaction: a batch sent again gets the same rows back and changes
-- nothing. The lane's row is locked before anything else, so a repeat that arrives while the first send still runs
-- waits for it and then answers from what it committed. A failed batch records nothing (it left nothing to repeat).
-- Lanes untouched for a day are deleted when a new lane is created. Times are milliseconds since 1970-01-01 UTC.

CREATE TYPE feedsync_like_result AS (
    failed_code TEXT, failed_message TEXT, liked BOOLEAN, like_count BIGINT, changed BOOLEAN, seq BIGINT
);

CREATE TABLE like_lanes (
    lane       UUID PRIMARY KEY,
    batch      BIGINT NOT NULL,
    results    feedsync_like_result[] NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE FUNCTION feedsync_apply_likes_once(
    lane_id uuid, batch_number bigint, units integer[], actions text[], user_ids text[], post_ids text[], ats bigint[]
)
RETURNS SETOF feedsync_like_result
LANGUAGE plpgsql AS $$
DECLARE
    known boolean;
    last_batch bigint;
    stored feedsync_like_result[];
    fresh feedsync_like_result[];
    now_ms bigint := (extract(epoch FROM now()) * 1000)::bigint;
BEGIN
    SELECT l.batch, l.results INTO last_batch, stored FROM like_lanes l WHERE l.lane = lane_id FOR NO KEY UPDATE;
    known := FOUND;
    IF known AND last_batch = batch_number THEN
        RETURN QUERY SELECT * FROM unnest(stored);
        RETURN;
    END IF;
    IF known AND last_batch > batch_number THEN
        RAISE EXCEPTION 'like batch % of lane % comes after batch %', batch_number, lane_id, last_batch
            USING ERRCODE = 'FSB01';
    END IF;

    SELECT coalesce(array_agg(ROW(r.c1, r.c2, r.c3, r.c4, r.c5, r.c6)::feedsync_like_result ORDER BY r.n), '{}')
    INTO fresh
    FROM feedsync_apply_likes(units, actions, user_ids, post_ids, ats) WITH ORDINALITY AS r(c1, c2, c3, c4, c5, c6, n);

    IF known THEN
        UPDATE like_lanes SET batch = batch_number, results = fresh, updated_at = now_ms WHERE lane = lane_id;
    ELSE
        INSERT INTO like_lanes (lane, batch, results, updated_at) VALUES (lane_id, batch_number, fresh, now_ms)
        ON CONFLICT (lane) DO NOTHING;
        IF NOT FOUND THEN
            -- The first send of this batch committed the lane while this one ran: undo this one; sent again, it
            -- answers from the lane.
            RAISE EXCEPTION 'like batch % of lane % was committed meanwhile', batch_number, lane_id
                USING ERRCODE = 'FSB02';
        END IF;
        DELETE FROM like_lanes WHERE updated_at < now_ms - 86400000;
    END IF;
    RETURN QUERY SELECT * FROM unnest(fresh);
END;
$$;
