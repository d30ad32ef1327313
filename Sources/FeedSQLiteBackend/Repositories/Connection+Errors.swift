internal import FeedCore
internal import FeedSQLite
internal import Foundation

extension Connection {
    /// Runs `body`, turning SQLite failures into ``StorageError``s; `map` may claim specific codes first.
    @discardableResult
    func mapErrors<T>(
        _ body: () throws -> T,
        _ map: (SQLiteError) -> StorageError? = { _ in nil }
    ) throws -> T {
        do {
            return try body()
        } catch let error as SQLiteError {
            if let mapped = map(error) { throw mapped }
            throw StorageError(error, path: storagePath)
        }
    }

    var storagePath: String? {
        if case .file(let path) = location { path } else { nil }
    }
}

/// Milliseconds since 1970 for a date, as stored in the schema.
func millis(_ date: Date) -> Int64 {
    Int64((date.timeIntervalSince1970 * 1000).rounded())
}

/// The date for milliseconds since 1970.
func date(millis: Int64) -> Date {
    Date(timeIntervalSince1970: Double(millis) / 1000)
}
