internal import FeedPublishers

/// A passthrough subject that only its owner can send to — the one way the domain holds a sender in an object it
/// hands out.
///
/// The subject lives only in two closures' captures, which a `Mirror` walk cannot see, and the sending closure takes
/// a ``Key``, an internal type: code outside the module can neither reach the subject nor cast the closure to
/// anything it could call. Subscribers get ``publisher``, a sealed subscribe-only handle.
struct SealedSubject<Output: Sendable>: Sendable {
    /// Unlocks the sending closure; internal, so code outside the module cannot make one.
    struct Key {}

    /// The subscribe-only handle.
    let publisher: AnyPublisher<Output, Never>
    private let sendBody: @Sendable (Key, Output) -> Void

    init() {
        let subject = PassthroughPublisher<Output, Never>()
        publisher = subject.sealed()
        sendBody = { _, value in subject.send(value) }
    }

    /// Delivers `value` to the current subscribers, on the calling thread.
    func send(_ value: Output) {
        sendBody(Key(), value)
    }
}
