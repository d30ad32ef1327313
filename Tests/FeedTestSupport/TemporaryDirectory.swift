public import Foundation

/// A fresh directory under the system temporary directory, removed when the value is released.
public final class TemporaryDirectory: Sendable {
    /// The directory's path.
    public let path: String

    /// Creates a new, empty directory.
    public init(_ label: String = "feedsync") {
        let base = FileManager.default.temporaryDirectory.path
        var template = Array("\(base)/\(label)-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { buffer in mkdtemp(buffer.baseAddress!) }
        precondition(created != nil, "cannot create a temporary directory under \(base)")
        path = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// A path inside the directory.
    public func file(_ name: String) -> String {
        path + "/" + name
    }
}

/// The bytes of a file, for "left untouched" assertions.
public func fileBytes(_ path: String) -> Data? {
    FileManager.default.contents(atPath: path)
}
