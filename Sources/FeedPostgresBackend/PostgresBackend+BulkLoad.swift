package import FeedCore

extension PostgresBackend {
    /// Bulk-loads users, posts and likes with `COPY` in one transaction (see ``FeedBulkLoader``): bounded memory
    /// apart from the set of like pairs added, keys assigned by the loader, like counts recounted and the load
    /// recorded in the replay baseline before commit. Not retried on a deadlock (the body may not be repeatable).
    ///
    /// The loader takes `EXCLUSIVE` locks on `users`, `posts` and `likes` (writes wait, reads go on) and disables the
    /// like-count trigger for the load, which needs the role that owns the tables.
    package func bulkLoad<T>(_ body: (any FeedBulkLoader) throws -> T) throws -> T {
        guard mode == .migrate else { throw StorageError.readOnly(path: location) }
        guard !writers.containsCurrentThread else { throw Self.reentrantWrite }
        writers.enter()
        defer { writers.leave() }
        return try withConnection { connection in
            try Self.control(connection, "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE", location: location)
            do {
                let loader = try PostgresBulkLoader(connection: connection, location: location)
                let value = try body(loader)
                try loader.finish()
                let result: PostgresResult
                do throws(PostgresFailure) {
                    result = try connection.executeScript("COMMIT")
                } catch {
                    throw error.storageError(location: location)
                }
                guard result.commandStatus != "ROLLBACK" else {
                    throw StorageError.database(
                        DatabaseFailure(
                            backend: Self.name, code: "25P02", message: "the bulk load was aborted and rolled back", sql: "COMMIT"))
                }
                loader.vacuumAfterCommit()
                return value
            } catch {
                Self.rollBack(connection)
                throw error
            }
        }
    }
}
