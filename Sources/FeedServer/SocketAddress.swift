#if canImport(Glibc)
    internal import Glibc
#endif

/// A literal IPv4 or IPv6 address and a port, as the `struct sockaddr` libmicrohttpd binds to.
package struct SocketAddress: Sendable {
    private enum Storage {
        case ipv4(sockaddr_in)
        case ipv6(sockaddr_in6)
    }

    private let storage: Storage

    /// Parses `host`: dotted IPv4 (`127.0.0.1`) or IPv6 (`::1`, without brackets).
    ///
    /// - Throws: ``HTTPServerError/invalidAddress(_:)``.
    package init(host: String, port: UInt16) throws(HTTPServerError) {
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, host, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            storage = .ipv4(v4)
            return
        }
        var v6 = sockaddr_in6()
        if inet_pton(AF_INET6, host, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            storage = .ipv6(v6)
            return
        }
        throw .invalidAddress(host)
    }

    /// Whether the address is IPv6.
    package var isIPv6: Bool {
        if case .ipv6 = storage { return true }
        return false
    }

    /// Whether the address is a loopback one (127.0.0.0/8 or ::1), reachable only from this machine.
    package var isLoopback: Bool {
        switch storage {
        case .ipv4(let address): UInt32(bigEndian: address.sin_addr.s_addr) >> 24 == 127
        case .ipv6(let address):
            withUnsafeBytes(of: address.sin6_addr) { bytes in bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1 }
        }
    }

    /// `host:port`, with an IPv6 host in brackets as URLs write it.
    package static func display(host: String, port: UInt16) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Calls `body` with a pointer to the `struct sockaddr_in` or `sockaddr_in6`, valid only during the call.
    func withSockaddr<T>(_ body: (UnsafeMutableRawPointer) -> T) -> T {
        switch storage {
        case .ipv4(var address): withUnsafeMutableBytes(of: &address) { bytes in body(bytes.baseAddress.unsafelyUnwrapped) }
        case .ipv6(var address): withUnsafeMutableBytes(of: &address) { bytes in body(bytes.baseAddress.unsafelyUnwrapped) }
        }
    }
}
