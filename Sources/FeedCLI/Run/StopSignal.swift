#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif
internal import Dispatch
internal import Synchronization

/// Waits until SIGINT (Ctrl-C), SIGTERM or ``fire()``, for the streaming commands.
///
/// The signals are ignored by default handling and caught by a `DispatchSource`, so the process ends through
/// the normal path (exit status 0, output flushed) instead of dying in the handler.
final class StopSignal: Sendable {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    private let sources: Mutex<[any DispatchSourceSignal]>

    init() {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.stream = stream
        self.continuation = continuation
        let queue = DispatchQueue(label: "feedsync.signals")
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield() }
            source.resume()
            sources.append(source)
        }
        self.sources = Mutex(sources)
    }

    deinit {
        sources.withLock { sources in for source in sources { source.cancel() } }
    }

    /// Ends the wait.
    func fire() {
        continuation.yield()
    }

    /// Returns once a signal arrived or ``fire()`` was called.
    func wait() async {
        for await _ in stream { return }
    }
}
