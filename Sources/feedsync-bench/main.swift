print("feedsync-bench: under construction")
