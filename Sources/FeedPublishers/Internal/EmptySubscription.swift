/// The subscription a late subscriber of a completed subject gets: `request` and `cancel` do nothing.
struct EmptySubscription: Subscription {
    func request(_ demand: Subscribers.Demand) {}

    func cancel() {}
}
