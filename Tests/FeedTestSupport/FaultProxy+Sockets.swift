internal import Glibc

// The socket, pipe and thread calls a ``FaultProxy`` is made of.

// MARK: - Sockets

/// Sends as much of `bytes` as the socket takes now: the count sent (0 when it is full), or -1 on an error.
///
/// `MSG_NOSIGNAL` turns a write to a closed peer into `EPIPE` instead of `SIGPIPE`.
func sendSome(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
    guard let base = bytes.baseAddress else { return 0 }
    var total = 0
    while total < bytes.count {
        let sent = send(fd, base + total, bytes.count - total, Int32(MSG_NOSIGNAL))
        if sent >= 0 {
            total += sent
        } else if errno == EAGAIN || errno == EWOULDBLOCK {
            break
        } else if errno != EINTR {
            return -1
        }
    }
    return total
}

/// Reads and throws away what `fd` holds now; `false` at its end of stream or on an error.
func discardInput(_ fd: Int32, _ scratch: UnsafeMutableRawBufferPointer) -> Bool {
    // Bounded, so that one busy sender cannot hold the relay thread.
    for _ in 0..<16 {
        let count = recv(fd, scratch.baseAddress, scratch.count, 0)
        if count == 0 { return false }
        if count < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR }
    }
    return true
}

/// Sets `O_NONBLOCK` and `FD_CLOEXEC` on `fd`.
func setNonBlockingAndCloseOnExec(_ fd: Int32) {
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    _ = fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC)
}

/// Turns Nagle's algorithm off, as libpq does on its own socket, so small messages are not held back.
func setNoDelay(_ fd: Int32) {
    var on: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
}

/// A non-blocking listening socket on 127.0.0.1 and a free port the kernel picked.
func listenOnLoopback() throws(FaultProxy.SetupError) -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw systemError("socket") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr = in_addr(s_addr: UInt32(0x7f00_0001).bigEndian)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && listen(fd, SOMAXCONN) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else {
        let error = systemError("bind/listen")
        Glibc.close(fd)
        throw error
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A non-blocking pipe whose read end a thread polls to be woken.
struct WakePipe: Sendable {
    let read: Int32
    let write: Int32

    init() throws(FaultProxy.SetupError) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw systemError("pipe") }
        for end in ends { setNonBlockingAndCloseOnExec(end) }
        read = ends[0]
        write = ends[1]
    }

    /// Makes the read end readable; a full pipe is already readable.
    func wake() {
        var byte: UInt8 = 1
        _ = Glibc.write(write, &byte, 1)
    }

    func drain() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while Glibc.read(read, &bytes, bytes.count) > 0 {}
    }

    func close() {
        Glibc.close(read)
        Glibc.close(write)
    }
}

/// A ``FaultProxy/SetupError`` for a failed system call, with `errno`'s message.
private func systemError(_ call: String) -> FaultProxy.SetupError {
    FaultProxy.SetupError(description: "FaultProxy: \(call) failed: \(String(cString: strerror(errno)))")
}

/// The body of a thread started by ``startThread(_:)``.
private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void

    init(_ run: @escaping @Sendable () -> Void) {
        self.run = run
    }
}

/// Starts a POSIX thread running `body`; the caller joins it.
func startThread(_ body: @escaping @Sendable () -> Void) throws(FaultProxy.SetupError) -> pthread_t {
    let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(
        &thread, nil,
        { raw in
            guard let raw else { return nil }
            Unmanaged<ThreadBody>.fromOpaque(raw).takeRetainedValue().run()
            return nil
        }, box)
    guard result == 0 else {
        Unmanaged<ThreadBody>.fromOpaque(box).release()
        throw FaultProxy.SetupError(description: "FaultProxy: pthread_create failed: \(String(cString: strerror(result)))")
    }
    return thread
}

/// The range of `host[:port]` in a `scheme://[userinfo@]host[:port][/…]` URL, or `nil` without `://`.
func hostRange(in url: String) -> Range<String.Index>? {
    guard let scheme = url.firstRange(of: "://") else { return nil }
    let end = url[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? url.endIndex
    let authority = url[scheme.upperBound..<end]
    let start = authority.lastIndex(of: "@").map { url.index(after: $0) } ?? authority.startIndex
    return start..<end
}
