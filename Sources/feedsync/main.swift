print("feedsync: under construction")
