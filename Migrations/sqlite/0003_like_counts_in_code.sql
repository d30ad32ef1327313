-- FeedSync schema, version 3: `posts.like_count` is kept by the statements that add or remove a like, not by triggers.
--
-- `LikeRepository.insert` / `delete` follow a changed row with `UPDATE posts SET like_count = like_count ± 1` in the
-- same transaction (and, under group commit, the same savepoint), as raw SQLite programs do. A trigger ran the same
-- UPDATE as a sub-program of every like statement — a frame allocated, zeroed and run inside the statement — which
-- cost ~5 % of a toggle's instructions (callgrind, `feedsync-bench w1`). Bulk loads recount the posts they touched,
-- as before. `feedsync check` and `InvariantChecker` still verify every count against the like rows. A binary of
-- schema version 2 refuses this database (a newer schema), so no older writer can add likes without counting them.
DROP TRIGGER likes_count_insert;
DROP TRIGGER likes_count_delete;
