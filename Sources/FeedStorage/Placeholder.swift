// Placeholder: the FeedStorage layer is being built.
