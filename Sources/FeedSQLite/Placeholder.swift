// Placeholder: the FeedSQLite layer is being built.
