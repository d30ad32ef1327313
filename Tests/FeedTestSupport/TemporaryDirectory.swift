public import Foundation
internal import Synchronization

/// A fresh directory under the system temporary directory, removed when the value is released.
public final class TemporaryDirectory: Sendable {
    /// The directory's path.
    public let path: String
    /// Work to do when the directory goes (dropping a test's PostgreSQL database).
    private let cleanups = Mutex<[@Sendable () -> Void]>([])

    /// Creates a new, empty directory.
    public init(_ label: String = "feedsync") {
        let base = FileManager.default.temporaryDirectory.path
        var template = Array("\(base)/\(label)-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { buffer in mkdtemp(buffer.baseAddress!) }
        precondition(created != nil, "cannot create a temporary directory under \(base)")
        path = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
    }

    deinit {
        for cleanup in cleanups.withLock({ $0 }).reversed() { cleanup() }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Runs `body` when the directory is released (before its files are removed).
    public func onRelease(_ body: @escaping @Sendable () -> Void) {
        cleanups.withLock { $0.append(body) }
    }

    /// A path inside the directory.
    public func file(_ name: String) -> String {
        path + "/" + name
    }
}

/// The bytes of a file, for "left untouched" assertions.
public func fileBytes(_ path: String) -> Data? {
    FileManager.default.contents(atPath: path)
}

/// A file's size in bytes, or 0 when it does not exist.
public func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
}

/// Waits (bounded, yielding the processor between checks) until `predicate` holds, for a state the test cannot
/// observe as an event (a queue's length, a file's size); returns whether it held.
public func eventually(seconds: Double = 10, _ predicate: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !predicate() {
        if Date() > deadline { return false }
        sched_yield()
    }
    return true
}

/// The next bytes of `handle` (empty at end of file), read with `read(2)` and retried on `EINTR`: Foundation's
/// `availableData` traps when a signal (a child's `SIGCHLD`) interrupts its read.
public func readSome(_ handle: FileHandle) -> Data {
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = read(handle.fileDescriptor, &buffer, buffer.count)
        if count >= 0 { return Data(buffer[0..<count]) }
        if errno != EINTR { return Data() }
    }
}

/// Everything `handle` gives until end of file, read as ``readSome(_:)`` does.
public func readAll(_ handle: FileHandle) -> Data {
    var data = Data()
    while true {
        let chunk = readSome(handle)
        if chunk.isEmpty { return data }
        data.append(chunk)
    }
}

/// Reads a pipe on a thread of its own until end of file, handing each chunk to `deliver` as it comes: no dispatch
/// source watches the descriptor (a `readabilityHandler` leaves one to be cancelled asynchronously, which races the
/// descriptor's close), and every read is ``readSome(_:)``'s, retried on `EINTR`.
public final class PipeReader: Sendable {
    private let ended = DispatchSemaphore(value: 0)

    /// Starts reading `handle`.
    public init(_ handle: FileHandle, _ deliver: @escaping @Sendable (Data) -> Void) {
        let thread = Thread { [ended] in
            while case let chunk = readSome(handle), !chunk.isEmpty { deliver(chunk) }
            ended.signal()
        }
        thread.name = "PipeReader"
        thread.start()
    }

    /// Waits until every chunk up to the end of file was delivered, at most `timeout` seconds; returns whether the end
    /// came.
    @discardableResult
    public func waitForEnd(timeout: Double = 30) -> Bool {
        guard ended.wait(timeout: .now() + timeout) == .success else { return false }
        ended.signal()  // later calls return at once
        return true
    }
}
