internal import CLibPQ
internal import FeedCore
internal import Foundation

extension PostgresConnection {
    // MARK: - Scrubbing

    /// Removes every secret (the password) from a message.
    static func scrub(_ message: String, secrets: [String]) -> String {
        var message = message
        for secret in secrets where !secret.isEmpty {
            message = message.replacingOccurrences(of: secret, with: "***")
        }
        return message
    }

    /// Removes secrets and bound values from a server message.
    ///
    /// The server quotes the values it echoes (`invalid input syntax for type bigint: "abc"`): every quoted
    /// occurrence of a bound value becomes `"…"`, and in a data exception (class 22) every quoted segment does.
    static func scrub(_ message: String, sqlState: String?, parameters: [DatabaseValue], secrets: [String]) -> String {
        var message = scrub(message, secrets: secrets)
        for parameter in parameters {
            let text: String? =
                switch parameter {
                case .null, .blob: nil
                case .integer(let value): String(value)
                case .real(let value): Self.text(value)
                case .text(let value): value
                }
            if let text, !text.isEmpty {
                message = message.replacingOccurrences(of: "\"\(text)\"", with: "\"…\"")
            }
        }
        if sqlState?.hasPrefix("22") == true {
            message = quotedSegmentsRemoved(message)
        }
        return message
    }

    /// `message` with the content of every `"…"` segment replaced by `…`.
    private static func quotedSegmentsRemoved(_ message: String) -> String {
        var result = ""
        var inside = false
        for character in message {
            if character == "\"" {
                if inside { result += "…\"" } else { result.append(character) }
                inside.toggle()
            } else if !inside {
                result.append(character)
            }
        }
        if inside { result += "…" }
        return result
    }

    // MARK: - Parameters

    /// A double in PostgreSQL's text input syntax.
    static func text(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
        return "\(value)"
    }

    /// Whether `text` holds a NUL character, which libpq would take for the end of a text parameter.
    static func containsNUL(_ text: String) -> Bool {
        text.utf8.withContiguousStorageIfAvailable { $0.contains(0) } ?? text.utf8.contains(0)
    }

    /// Calls `body` with libpq's parameter arrays for `parameters`: count, types, values, lengths and formats.
    ///
    /// Integers, doubles and text are sent in text format, blobs in binary. With `typed`, integers are declared
    /// `int8`, doubles `float8` and blobs `bytea` (for SQL of the caller's, where the server cannot always infer a
    /// type); text stays `unknown` so the server can read it as the column's type.
    static func withParameters<R>(
        _ parameters: [DatabaseValue], typed: Bool,
        _ body: (Int32, UnsafePointer<UInt32>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> R
    ) -> R {
        if parameters.isEmpty { return body(0, nil, nil, nil, nil) }
        // Every array sized once: a like batch's statement has seven parameters and is sent thousands of times a
        // second, so no parameter gets an array of its own.
        var size = 1
        for parameter in parameters {
            switch parameter {
            case .null: break
            case .integer: size += 21
            case .real: size += 33
            case .text(let value): size += value.utf8.count + 1
            case .blob(let value): size += value.count + 1
            }
        }
        var storage: [UInt8] = []
        storage.reserveCapacity(size)
        var offsets: [Int] = []
        offsets.reserveCapacity(parameters.count)
        var types: [UInt32] = []
        types.reserveCapacity(parameters.count)
        var lengths: [Int32] = []
        lengths.reserveCapacity(parameters.count)
        var formats: [Int32] = []
        formats.reserveCapacity(parameters.count)
        for parameter in parameters {
            var type: UInt32 = 0
            var format: Int32 = 0
            let start = storage.count
            switch parameter {
            case .null: break
            case .integer(let value):
                storage.append(contentsOf: String(value).utf8)
                type = 20
            case .real(let value):
                storage.append(contentsOf: text(value).utf8)
                type = 701
            case .text(let value): storage.append(contentsOf: value.utf8)
            case .blob(let value):
                storage.append(contentsOf: value)
                type = 17
                format = 1
            }
            if case .null = parameter {
                offsets.append(-1)
                lengths.append(0)
            } else {
                offsets.append(start)
                lengths.append(Int32(storage.count - start))
                storage.append(0)
            }
            types.append(typed ? type : 0)
            formats.append(format)
        }
        // One byte at least, so that the buffer has an address even when every parameter is NULL.
        storage.append(0)
        return storage.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { preconditionFailure("a non-empty array has storage") }
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { characters in
                let values: [UnsafePointer<CChar>?] = offsets.map { offset in offset < 0 ? nil : characters + offset }
                return body(Int32(parameters.count), types, values, lengths, formats)
            }
        }
    }
}

/// The last few prepared statements, found by the address of their text's bytes.
///
/// Each entry keeps its `String`, so its storage stays allocated and unchanged for as long as the entry lives: a text
/// stored at the same address with the same length *is* that text, with no hashing and no comparison of bytes. The
/// statements FeedSync prepares are string constants (their bytes live in the binary) or strings built once, so a
/// repeated statement is found here; anything else falls through to the dictionary keyed by the whole text. Texts
/// of 15 bytes or fewer are stored inline in the `String` (no stable address) and always fall through.
struct RecentStatements {
    private var entries: [(address: UnsafeRawPointer, count: Int, sql: String, name: String)] = []
    private var next = 0
    static let capacity = 16

    /// The name of `sql` if it is one of the recent statements' own storage.
    func name(for sql: String) -> String? {
        guard let (address, count) = Self.storage(of: sql) else { return nil }
        for entry in entries where entry.address == address && entry.count == count { return entry.name }
        return nil
    }

    /// Remembers `sql` (replacing the oldest entry when full), unless its bytes have no stable address.
    mutating func remember(_ sql: String, name: String) {
        guard let (address, count) = Self.storage(of: sql) else { return }
        let entry = (address: address, count: count, sql: sql, name: name)
        if entries.count < Self.capacity {
            entries.append(entry)
        } else {
            entries[next] = entry
            next = (next + 1) % Self.capacity
        }
    }

    /// Where `sql`'s UTF-8 bytes are stored, for a native string too long to be stored inline.
    private static func storage(of sql: String) -> (UnsafeRawPointer, Int)? {
        guard sql.utf8.count > 15 else { return nil }
        return sql.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.baseAddress.map { (UnsafeRawPointer($0), bytes.count) }
        } ?? nil
    }
}

/// A notification received on a connection that ran `LISTEN` (libpq's `PGnotify`).
struct PostgresNotification: Sendable, Equatable {
    /// The channel it was sent on.
    let channel: String
    /// The payload (empty when none was given).
    let payload: String
    /// The server process id of the session that sent it.
    let senderPID: Int32
}
