-- FeedSync schema, version 6: the likes table has no index of its own besides its primary key.
--
-- `likes_post (post_key)` was written by every like and unlike, a fourth B-tree page (and WAL frame) in a toggle's
-- commit next to the like row, the post's count and the event, while no query of the product reads likes by post
-- alone: the feed page, the replicas and the like commands probe `(user_key, post_key)` through the primary key.
-- `feedsync check` and bulk loads count every post's likes in one grouped pass over the table instead. Posts are never
-- deleted and their keys never change, so the foreign key from likes to posts needs no index on the child side.
DROP INDEX likes_post;
