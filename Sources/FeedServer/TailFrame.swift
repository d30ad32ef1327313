internal import FeedJSON
internal import FeedSync
internal import Foundation

/// One event of the shared tail, encoded once per visibility as a complete server-sent event (`id:` and `data:`).
struct TailFrame: Sendable {
    let seq: Int64
    /// The log event's ``FeedCore/EventRecord/check``: a stream that read up to this seq from the log checks that the
    /// tail holds the same event.
    let check: Int64
    /// The user who sees ``own``; empty when everyone sees ``shared``.
    let ownerID: String
    /// The event as every other viewer sees it (``FeedCore/EventRecord/seen(by:)``).
    let shared: [UInt8]
    /// The event as ``ownerID`` sees it.
    let own: [UInt8]
    /// When the event was committed.
    let committed: Date

    init(_ event: EventRecord) {
        seq = event.seq
        check = event.check
        committed = event.at
        // Shown to everyone as `seen(by: nil)`: an erased user's unlike (no user id) is a count change, as in a catch-up.
        shared = Self.encode(event.seen(by: nil))
        if event.isPrivateToItsUser {
            ownerID = event.userID
            own = Self.encode(event)
        } else {
            ownerID = ""
            own = []
        }
    }

    func bytes(for viewerID: String) -> [UInt8] {
        !ownerID.isEmpty && ownerID == viewerID ? own : shared
    }

    /// `id: SEQ.CHECK`, `data: JSON`, a blank line.
    static func encode(_ event: EventRecord) -> [UInt8] {
        Array("id: \(TailFrame.id(of: event))\ndata: \(JSONShapes.event(event).rendered)\n\n".utf8)
    }

    /// An event's SSE id: its seq, a dot, and its ``EventRecord/check`` in eight hex digits, so that a client
    /// reconnecting with it as `Last-Event-ID` is told when that seq now names another event (a rewritten log).
    static func id(of event: EventRecord) -> String {
        let hex = String(event.check, radix: 16)
        return "\(event.seq).\(String(repeating: "0", count: max(0, 8 - hex.count)))\(hex)"
    }
}

extension StreamHub {
    /// What a stream's reader gets from the tail.
    enum Read {
        /// `count` bytes were copied: whole frames through `through`, whose event's check is `check`.
        case copied(count: Int, through: Int64, check: Int64)
        /// The next frame does not fit in the buffer: its bytes, to send from the stream's own buffer.
        case oversized([UInt8], seq: Int64, check: Int64)
        /// The tail holds another event at the cursor than the one the stream read from the log: the log was rewritten
        /// in between; `head` is the tail's last seq.
        case rewritten(head: Int64)
        /// Nothing after the cursor yet; `generation` counts heartbeats.
        case nothing(generation: Int)
        /// The cursor is older than the tail.
        case behind
        /// The server stops.
        case stopping
    }
}
