#if canImport(Glibc)
    internal import Glibc
#endif

/// `serve [--listen HOST:PORT] [--demo]`.
struct ServeCommand: Sendable, Hashable {
    /// The address to listen on: a literal IPv4 or IPv6 address (without brackets).
    let host: String
    /// The port; 0 picks a free one.
    let port: UInt16
    /// Demo mode: sample data in an empty database, and the page offers the sample users' tokens.
    let demo: Bool
    /// `--max-streams`: event streams open at once.
    var maximumStreams = 10_000
    /// `--max-connections-per-ip`: connections from one client address (0: no limit).
    var maximumConnectionsPerAddress = 500
    /// `--workers`: threads for the routes that wait for the database.
    var workers = 8
    /// `--public-metrics`: `/metrics` answers every address, not only loopback.
    var publicMetrics = false

    /// Where `serve` listens without `--listen`.
    static let defaultListen = "127.0.0.1:8080"

    /// Parses `--listen`: `HOST:PORT`, an IPv6 host in brackets (`[::1]:8080`).
    ///
    /// - Throws: ``ParserError/invalidListen(_:)``, and ``ParserError/demoNeedsLoopback(_:)`` for `demo` off loopback.
    init(listen: String, demo: Bool) throws(ParserError) {
        guard let colon = listen.lastIndex(of: ":") else { throw .invalidListen(listen) }
        var host = String(listen[..<colon])
        let portText = listen[listen.index(after: colon)...]
        if host.hasPrefix("["), host.hasSuffix("]"), host.count > 2 {
            host = String(host.dropFirst().dropLast())
            guard host.contains(":") else { throw .invalidListen(listen) }
        } else if host.contains(":") {
            throw .invalidListen(listen)  // an IPv6 host needs brackets
        }
        guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
            let port = UInt16(portText), let loopback = Self.isLoopback(host)
        else { throw .invalidListen(listen) }
        if demo, !loopback { throw .demoNeedsLoopback(listen) }
        self.host = host
        self.port = port
        self.demo = demo
    }

    /// Whether `host` is a loopback address (127.0.0.0/8 or ::1); `nil` when it is no literal IP address.
    static func isLoopback(_ host: String) -> Bool? {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            return withUnsafeBytes(of: v6) { bytes in bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1 }
        }
        return nil
    }

    /// The URL the server answers on, for the start line.
    func url(port: UInt16) -> String {
        host.contains(":") ? "http://[\(host)]:\(port)/" : "http://\(host):\(port)/"
    }
}
