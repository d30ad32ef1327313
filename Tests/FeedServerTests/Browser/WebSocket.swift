import Foundation
import Synchronization

/// A minimal WebSocket client (RFC 6455, <https://www.rfc-editor.org/rfc/rfc6455>) for Chromium's DevTools
/// endpoint on the loopback interface.
///
/// `URLSessionWebSocketTask` would be the obvious choice, but FoundationNetworking on Linux runs on the system's
/// libcurl, and Debian's is built without WebSocket support ("WebSockets not supported by libcurl"). This client
/// covers what DevTools needs: `ws://` to an IPv4 address, text frames out (masked, as a client must), text and
/// binary frames in (fragmented or not), ping answered with pong, close. It does not check the server's
/// `Sec-WebSocket-Accept` (no SHA-1 in Foundation on Linux): the peer is the browser the test started. A thread of its own reads the socket and
/// hands each message to `onMessage`; `onClose` runs once when the connection ends.
final class WebSocket: Sendable {
    private let writer: FrameWriter

    /// Connects to `url` (`ws://127.0.0.1:PORT/path`) and completes the opening handshake.
    init(
        url: URL, onMessage: @escaping @Sendable (Data) -> Void, onClose: @escaping @Sendable (String) -> Void
    ) throws {
        guard url.scheme == "ws", let host = url.host, let port = url.port else { throw BrowserError("not a ws:// URL: \(url)") }
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw BrowserError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            let reason = String(cString: strerror(errno))
            Glibc.close(socket)
            throw BrowserError("cannot connect to \(url): \(reason)")
        }
        let key = Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let path = url.path.isEmpty ? "/" : url.path
        let request =
            "GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n"
        let reader = SocketReader(socket: socket)
        do {
            // The handshake is bounded; afterwards reads block until a message comes or close() shuts the socket.
            try Self.setReceiveTimeout(socket, seconds: 10)
            try Self.writeAll(socket, Data(request.utf8))
            let head = try reader.readHead()
            guard head.hasPrefix("HTTP/1.1 101") else { throw BrowserError("handshake refused: \(head)") }
            try Self.setReceiveTimeout(socket, seconds: 0)
        } catch {
            Glibc.close(socket)
            throw error
        }
        let writer = FrameWriter(socket: socket)
        self.writer = writer
        let thread = Thread {
            let reason = Self.readMessages(reader, onMessage: onMessage) { try? writer.write(opcode: 0xA, $0) }
            onClose(reason)
            writer.release()
        }
        thread.name = "cdp-websocket"
        thread.start()
    }

    /// Sends `text` as one text frame.
    func send(_ text: String) throws {
        try writer.write(opcode: 0x1, Data(text.utf8))
    }

    /// Ends the connection: the reading thread sees the end, calls `onClose` and closes the socket.
    func close() {
        writer.shutDown()
    }

    // MARK: - Frames

    /// A masked client frame: FIN, `opcode`, the length in 7, 16 or 64 bits, the mask, the masked payload.
    fileprivate static func frame(opcode: UInt8, _ payload: Data) -> Data {
        var frame = Data([0x80 | opcode])
        switch payload.count {
        case ..<126: frame.append(0x80 | UInt8(payload.count))
        case ..<65536: frame.append(contentsOf: [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)])
        default:
            frame.append(0x80 | 127)
            frame.append(contentsOf: (0..<8).reversed().map { UInt8((UInt64(payload.count) >> (8 * UInt64($0))) & 0xFF) })
        }
        let mask = (0..<4).map { _ in UInt8.random(in: 0...255) }
        frame.append(contentsOf: mask)
        frame.append(contentsOf: payload.enumerated().map { $0.element ^ mask[$0.offset % 4] })
        return frame
    }

    /// Reads frames until the connection ends; returns why it ended.
    private static func readMessages(
        _ reader: SocketReader, onMessage: (Data) -> Void, pong: (Data) -> Void
    ) -> String {
        var message = Data()
        do {
            while true {
                let head = try reader.read(2)
                let opcode = head[0] & 0x0F, final = head[0] & 0x80 != 0
                var length = UInt64(head[1] & 0x7F)
                if length == 126 { length = try reader.read(2).reduce(0) { $0 << 8 | UInt64($1) } }
                if length == 127 { length = try reader.read(8).reduce(0) { $0 << 8 | UInt64($1) } }
                let mask = head[1] & 0x80 != 0 ? try reader.read(4) : nil
                var payload = try reader.read(Int(length))
                if let mask { payload = Data(payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }) }
                switch opcode {
                case 0x0, 0x1, 0x2:
                    message.append(payload)
                    if final {
                        onMessage(message)
                        message = Data()
                    }
                case 0x8: return "closed by the browser"
                case 0x9: pong(payload)
                default: break
                }
            }
        } catch {
            return "\(error)"
        }
    }

    private static func setReceiveTimeout(_ socket: Int32, seconds: Int) throws {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        guard setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) == 0 else {
            throw BrowserError("SO_RCVTIMEO: \(String(cString: strerror(errno)))")
        }
    }

    fileprivate static func writeAll(_ socket: Int32, _ data: Data) throws {
        try data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.send(socket, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { throw BrowserError("WebSocket write: \(String(cString: strerror(errno)))") }
                offset += written
            }
        }
    }
}

/// Writes whole frames, one writer at a time, until the connection is shut down.
private final class FrameWriter: Sendable {
    private let socket: Int32
    /// Whether the socket was shut down (no more writes) and whether it was closed.
    private let state = Mutex((shutDown: false, closed: false))

    init(socket: Int32) {
        self.socket = socket
    }

    func write(opcode: UInt8, _ payload: Data) throws {
        try state.withLock { state in
            if state.shutDown { throw BrowserError("the WebSocket is closed") }
            try WebSocket.writeAll(socket, WebSocket.frame(opcode: opcode, payload))
        }
    }

    /// Shuts the socket down both ways, which ends the reading thread's `recv`.
    func shutDown() {
        state.withLock { state in
            if !state.shutDown && !state.closed { shutdown(socket, Int32(SHUT_RDWR)) }
            state.shutDown = true
        }
    }

    /// Closes the socket (the reading thread, once it is done with it).
    func release() {
        state.withLock { state in
            if !state.closed { Glibc.close(socket) }
            state = (true, true)
        }
    }
}

/// Buffered reads from a socket, used by one thread at a time (the handshake, then the reading thread).
/// `@unchecked Sendable`: handed from the initializer to the reading thread, never used by both.
private final class SocketReader: @unchecked Sendable {
    private let socket: Int32
    private var buffer = Data()

    init(socket: Int32) {
        self.socket = socket
    }

    /// Exactly `count` bytes.
    func read(_ count: Int) throws -> Data {
        while buffer.count < count { try fill() }
        let bytes = buffer.prefix(count)
        buffer = Data(buffer.dropFirst(count))
        return Data(bytes)
    }

    /// The HTTP response head, up to the blank line.
    func readHead() throws -> String {
        let end = Data("\r\n\r\n".utf8)
        while true {
            if let range = buffer.range(of: end) {
                let head = String(decoding: buffer[..<range.lowerBound], as: UTF8.self)
                buffer = Data(buffer[range.upperBound...])
                return head
            }
            try fill()
        }
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        let count = recv(socket, &chunk, chunk.count, 0)
        if count < 0 && errno == EINTR { return }
        guard count > 0 else { throw BrowserError(count == 0 ? "the connection ended" : String(cString: strerror(errno))) }
        buffer.append(contentsOf: chunk[..<count])
    }
}
