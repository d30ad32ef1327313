package import FeedCore
internal import Foundation
internal import Synchronization

extension PostgresBackend {
    /// The first key of the advisory locks that hold names (`FeLe` in ASCII); apart from the migrator's one-key
    /// lock and the subscriber passes' `FeSu` space.
    static let leaseLockSpace: Int32 = 0x4665_4C65

    /// Holds `name` with a session-level `pg_try_advisory_lock` on a connection of its own (not pooled), kept open
    /// until ``FeedNameLease/release()``. If that connection is lost — the server restarted, the session was
    /// terminated — the server drops the lock, and another holder may take the name.
    ///
    /// Related documentation: <https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS>
    package func tryHold(name: String) throws -> (any FeedNameLease)? {
        let connection = try Self.connect(
            url: url, location: location, options: options, statementTimeout: nil, readOnly: false,
            applicationName: "feedsync-lease")
        do {
            let taken = try connection.execute(
                "SELECT pg_try_advisory_lock($1::integer, hashtext($2))",
                [.integer(Int64(Self.leaseLockSpace)), .text(name)]
            ).bool(0, 0)
            guard taken == true else {
                connection.close()
                return nil
            }
        } catch {
            connection.close()
            throw error.storageError(location: location)
        }
        return PostgresNameLease(connection: connection)
    }
}

/// A name held by an advisory lock on its own session; closing the session releases it.
///
/// `@unchecked Sendable`: the connection is touched only under `lock`, by `release()`.
private final class PostgresNameLease: FeedNameLease, @unchecked Sendable {
    private let lock = NSLock()
    private var connection: PostgresConnection?

    init(connection: PostgresConnection) {
        self.connection = connection
    }

    deinit {
        release()
    }

    func release() {
        lock.lock()
        defer { lock.unlock() }
        // Ending the session releases every advisory lock it holds.
        connection?.close()
        connection = nil
    }
}
