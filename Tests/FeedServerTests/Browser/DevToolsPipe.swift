import Foundation
import Synchronization

/// The two pipes of Chromium's `--remote-debugging-pipe`, seen from the test's side.
///
/// Chromium reads DevTools commands from its fd 3 and writes answers and events to its fd 4;
/// every message either way is one JSON text followed by a NUL byte.
///
/// A thread of its own reads the answer pipe and hands each message to `onMessage`; `onClose` runs once when the
/// pipe ends (the browser exited or ``close()`` was called). Writes and the reading thread's polls are bounded.
final class DevToolsPipe: Sendable {
    /// The descriptors to map into the browser: its fd 3 (commands) and fd 4 (answers). The parent closes them once
    /// the browser started, with ``closeChildEnds()``.
    let childCommands: Int32, childAnswers: Int32
    private let commands: Int32
    private let answers: Int32
    /// Whether the command pipe was closed (no more writes), the browser's ends were closed, the reading thread runs.
    private let state = Mutex((closed: false, childEndsClosed: false, reading: false))
    private let stopping = Atomic(false)

    /// Creates both pipes, moved at once above the standard descriptors (where mapping them to 3 and 4 cannot
    /// overwrite one another) and close-on-exec (so no other child keeps them open; Glibc's `pipe2` is not visible).
    init() throws {
        let (commandsRead, commandsWrite) = try Self.makePipe()
        let (answersRead, answersWrite) = try Self.makePipe()
        childCommands = commandsRead
        childAnswers = answersWrite
        commands = commandsWrite
        answers = answersRead
        _ = fcntl(commands, F_SETFL, fcntl(commands, F_GETFL) | O_NONBLOCK)
    }

    private static func makePipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw BrowserError("pipe: \(String(cString: strerror(errno)))") }
        let moved = fds.map { fcntl($0, F_DUPFD_CLOEXEC, 10) }
        for fd in fds { Glibc.close(fd) }
        guard moved.allSatisfy({ $0 >= 0 }) else { throw BrowserError("fcntl: \(String(cString: strerror(errno)))") }
        return (moved[0], moved[1])
    }

    /// Closes the browser's ends in this process (once it has them), so that its exit ends the answer pipe.
    func closeChildEnds() {
        state.withLock { state in
            if !state.childEndsClosed { for fd in [childCommands, childAnswers] { Glibc.close(fd) } }
            state.childEndsClosed = true
        }
    }

    /// Starts the reading thread.
    func start(onMessage: @escaping @Sendable (Data) -> Void, onClose: @escaping @Sendable (String) -> Void) {
        state.withLock { $0.reading = true }
        let thread = Thread { [self] in
            onClose(readMessages(onMessage))
            Glibc.close(answers)
        }
        thread.name = "cdp-pipe"
        thread.start()
    }

    /// Writes `text` and its NUL terminator, waiting at most `timeout` for room in the pipe.
    func send(_ text: String, timeout: Duration = .seconds(10)) throws {
        let deadline = ContinuousClock.now + timeout
        try state.withLock { state in
            if state.closed { throw BrowserError("the DevTools pipe is closed") }
            let bytes = Array(text.utf8) + [0]
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { Self.writeWithoutSIGPIPE(commands, $0) }
                if written > 0 {
                    offset += written
                } else if written < 0 && (errno == EAGAIN || errno == EINTR) {
                    guard ContinuousClock.now < deadline else { throw BrowserError("the browser reads no commands") }
                    var descriptor = pollfd(fd: commands, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&descriptor, 1, 100)
                } else {
                    throw BrowserError("DevTools pipe write: \(String(cString: strerror(errno)))")
                }
            }
        }
    }

    /// `write` with SIGPIPE blocked on this thread, so a browser that exited makes it fail with `EPIPE` instead of
    /// ending the test process; the SIGPIPE it raised is taken back before the thread's mask is restored.
    private static func writeWithoutSIGPIPE(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Int {
        var pipeSignal = sigset_t(), previous = sigset_t(), pending = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        sigpending(&pending)
        let alreadyPending = sigismember(&pending, SIGPIPE) == 1
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        let written = write(fd, buffer.baseAddress, buffer.count)
        if written < 0 && errno == EPIPE && !alreadyPending {
            var now = timespec()
            _ = sigtimedwait(&pipeSignal, nil, &now)
            errno = EPIPE
        }
        return written
    }

    /// Closes the command pipe (the browser sees its end) and stops the reading thread within its poll interval
    /// (which then closes the answer pipe; without that thread, this does).
    func close() {
        stopping.store(true, ordering: .releasing)
        state.withLock { state in
            if !state.closed { Glibc.close(commands) }
            if !state.closed && !state.reading { Glibc.close(answers) }
            state.closed = true
        }
        closeChildEnds()
    }

    /// Reads NUL-terminated messages until the pipe ends or ``close()``; returns why it ended.
    private func readMessages(_ onMessage: (Data) -> Void) -> String {
        var buffer = Data()
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while !stopping.load(ordering: .acquiring) {
            var descriptor = pollfd(fd: answers, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 100)
            if ready < 0 && errno != EINTR { return "poll: \(String(cString: strerror(errno)))" }
            guard ready > 0 else { continue }
            let count = read(answers, &chunk, chunk.count)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            guard count > 0 else { return count == 0 ? "the browser closed the pipe" : String(cString: strerror(errno)) }
            buffer.append(contentsOf: chunk[..<count])
            while let end = buffer.firstIndex(of: 0) {
                onMessage(Data(buffer[buffer.startIndex..<end]))
                buffer.removeSubrange(buffer.startIndex...end)
            }
        }
        return "the DevTools pipe was closed"
    }
}
