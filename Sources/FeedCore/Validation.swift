/// The rules every id and text must follow, checked in code before SQLite checks them again in the schema.
public enum Validation {
    /// The longest id accepted, in characters.
    public static let maximumIDLength = 64
    /// The longest post body accepted, in characters.
    public static let maximumBodyLength = 10_000
    /// The longest user name accepted, in characters.
    public static let maximumNameLength = 200

    /// Checks an id: 1 to 64 characters from `A–Z a–z 0–9 _ . : @ -`.
    ///
    /// - Parameter field: what the id names (`user id`, `post id`), for the error.
    /// - Throws: ``StorageError/constraintViolation(field:reason:)`` naming the field and the rule.
    public static func checkID(_ id: String, field: String) throws(StorageError) {
        let bytes = id.utf8
        if bytes.isEmpty { throw .constraintViolation(field: field, reason: "it is empty") }
        // Every allowed character is ASCII, so one pass over the UTF-8 bytes decides, with no Unicode work.
        let allowed = bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
        let length = allowed ? bytes.count : id.unicodeScalars.count
        if length > maximumIDLength {
            throw .constraintViolation(field: field, reason: "it is longer than \(maximumIDLength) characters")
        }
        if !allowed {
            throw .constraintViolation(field: field, reason: "use only letters, digits and _ . : @ -")
        }
    }

    /// Checks a post body: 1 to 10,000 characters, no NUL.
    public static func checkBody(_ body: String) throws(StorageError) {
        if body.isEmpty { throw .constraintViolation(field: "post text", reason: "it is empty") }
        if body.unicodeScalars.count > maximumBodyLength {
            throw .constraintViolation(field: "post text", reason: "it is longer than \(maximumBodyLength) characters")
        }
        if body.unicodeScalars.contains("\0") {
            throw .constraintViolation(field: "post text", reason: "it contains a NUL character")
        }
    }

    /// Checks a user name: at most 200 characters, no NUL.
    public static func checkName(_ name: String) throws(StorageError) {
        if name.unicodeScalars.count > maximumNameLength {
            throw .constraintViolation(field: "user name", reason: "it is longer than \(maximumNameLength) characters")
        }
        if name.unicodeScalars.contains("\0") {
            throw .constraintViolation(field: "user name", reason: "it contains a NUL character")
        }
    }
}
