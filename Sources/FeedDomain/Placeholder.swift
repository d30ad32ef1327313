// Placeholder: the FeedDomain layer is being built.
