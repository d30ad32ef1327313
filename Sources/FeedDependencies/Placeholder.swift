// Placeholder: the FeedDependencies layer is being built.
