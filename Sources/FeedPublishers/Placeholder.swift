// Placeholder: the FeedPublishers layer is being built.
