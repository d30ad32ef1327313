import Synchronization

/// A type-erased cancellable that cancels its action when it is deinitialized.
///
/// Keep the `AnyCancellable` returned by `sink` as long as you want values: dropping it
/// cancels the subscription. `cancel()` runs the action at most once.
///
/// ```swift
/// var cancellables = Set<AnyCancellable>()
/// publisher.sink { print($0) }.store(in: &cancellables)
/// ```
public final class AnyCancellable: Cancellable, Hashable, Sendable {
    private let action: Mutex<(@Sendable () -> Void)?>

    /// Creates a cancellable that runs `cancel` once, on `cancel()` or on deinit.
    ///
    /// - Parameter cancel: The action to run.
    public init(_ cancel: @escaping @Sendable () -> Void) {
        action = Mutex(cancel)
    }

    /// Creates a cancellable that forwards to another cancellable once.
    ///
    /// - Parameter canceller: The cancellable to cancel.
    public convenience init(_ canceller: some Cancellable & Sendable) {
        self.init { canceller.cancel() }
    }

    deinit {
        cancel()
    }

    /// Runs the cancel action if it has not run yet.
    public func cancel() {
        let action = action.withLock(annotating: self) { stored -> (@Sendable () -> Void)? in
            let taken = stored
            stored = nil
            return taken
        }
        action?()
    }

    /// Stores this cancellable in a collection, such as an array.
    ///
    /// - Parameter collection: The collection to append to.
    public func store<C: RangeReplaceableCollection>(in collection: inout C) where C.Element == AnyCancellable {
        collection.append(self)
    }

    /// Stores this cancellable in a set.
    ///
    /// - Parameter set: The set to insert into.
    public func store(in set: inout Set<AnyCancellable>) {
        set.insert(self)
    }

    /// Identity equality: two cancellables are equal only if they are the same instance.
    public static func == (lhs: AnyCancellable, rhs: AnyCancellable) -> Bool {
        lhs === rhs
    }

    /// Hashes the instance identity.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(ObjectIdentifier(self))
    }
}
