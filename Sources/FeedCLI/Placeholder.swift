// Placeholder: the FeedCLI layer is being built.
