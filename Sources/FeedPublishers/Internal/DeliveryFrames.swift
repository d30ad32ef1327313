#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One delivery in progress on the current thread; frames are stack-allocated and linked.
///
/// A current-value subject's `send` also records itself in its frame (`sender`, `version`,
/// `value`), so that a `send` nested inside it on the same thread can first hand the outer value
/// to the subscribers the outer loop has not reached yet (see `SubjectCore.send`).
@usableFromInline
struct DeliveryFrame {
    /// The subscription whose subscriber is being called right now, if any.
    @usableFromInline var current: UnsafeRawPointer?
    /// The frame of the delivery this one is nested in.
    @usableFromInline var previous: UnsafeMutablePointer<DeliveryFrame>?
    /// The current-value engine (`SubjectCore`) whose `send` pushed this frame; nil for other frames.
    @usableFromInline var sender: UnsafeRawPointer?
    /// That send's version (meaningful only when `sender` is set).
    @usableFromInline var version = 0
    /// That send's value, of the sender's `Output` type; valid while this frame is on the stack.
    @usableFromInline var value: UnsafeRawPointer?

    init(current: UnsafeRawPointer?, previous: UnsafeMutablePointer<DeliveryFrame>?) {
        self.current = current
        self.previous = previous
    }
}

/// Per-thread record of the deliveries in progress, so `cancel()` can tell a reentrant call
/// (from inside the subscriber's own callback on this thread) from a call on another thread.
@usableFromInline
enum DeliveryFrames {
    /// The thread-specific slot holding the innermost frame of the current thread.
    static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "FeedPublishers: pthread_key_create failed (\(status))")
        return key
    }()

    /// Runs `body` with a fresh frame pushed for the current thread.
    @usableFromInline
    static func withFrame<R>(_ body: (UnsafeMutablePointer<DeliveryFrame>) -> R) -> R {
        let key = key
        let previous = pthread_getspecific(key)?.assumingMemoryBound(to: DeliveryFrame.self)
        var frame = DeliveryFrame(current: nil, previous: previous)
        return withUnsafeMutablePointer(to: &frame) { pointer in
            pthread_setspecific(key, pointer)
            defer { pthread_setspecific(key, previous) }
            return body(pointer)
        }
    }

    /// How many deliveries to `object` are in progress on the current thread.
    static func count(of object: AnyObject) -> Int {
        let identity = UnsafeRawPointer(Unmanaged.passUnretained(object).toOpaque())
        var count = 0
        var next = pthread_getspecific(key)?.assumingMemoryBound(to: DeliveryFrame.self)
        while let frame = next {
            if frame.pointee.current == identity { count += 1 }
            next = frame.pointee.previous
        }
        return count
    }

    /// Gives the processor to another thread while waiting for a delivery elsewhere to finish.
    static func pause(_ spins: Int) {
        if spins > 64 { sched_yield() }
    }
}
