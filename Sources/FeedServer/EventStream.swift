internal import CMicroHTTPD
internal import FeedJSON
internal import FeedSync
internal import Foundation

extension ServerCore {
    /// Answers `GET /api/events` with a callback response whose reader is an ``EventStream``; `Last-Event-ID` wins
    /// over `after`.
    func startEventStream(on connection: OpaquePointer) -> MHD_Result {
        let given = header(connection, "Last-Event-ID") ?? query(connection, "after")
        var after: Int64 = 0
        if let given {
            guard let parsed = Int64(given), parsed >= 0 else {
                return queue(
                    .error(400, code: "invalidRequest", "invalid seq \(FeedError.quoted(given)): pass a seq, 0 or more"), on: connection)
            }
            after = parsed
        }
        let stream = Unmanaged.passRetained(EventStream(core: self, after: after)).toOpaque()
        // The response holds the stream until libmicrohttpd frees it, which calls `release` exactly once.
        let response = MHD_create_response_from_callback(
            UInt64.max, 16 << 10,  // MHD_SIZE_UNKNOWN: sent chunked
            { stream, _, buffer, size in
                guard let stream, let buffer else { return EventStream.endWithError }
                return Unmanaged<EventStream>.fromOpaque(stream).takeUnretainedValue().read(into: buffer, capacity: size)
            },
            stream,
            { stream in
                guard let stream else { return }
                Unmanaged<EventStream>.fromOpaque(stream).release()
            })
        guard let response else {
            Unmanaged<EventStream>.fromOpaque(stream).release()
            return .NO
        }
        defer { MHD_destroy_response(response) }
        _ = MHD_add_response_header(response, "Content-Type", "text/event-stream")
        _ = MHD_add_response_header(response, "Cache-Control", "no-cache")
        return MHD_queue_response(connection, 200, response)
    }
}

/// One `GET /api/events` stream: the log after its cursor, then live, as server-sent events.
///
/// libmicrohttpd calls ``read(into:capacity:)`` on the connection's own thread whenever it can send more. The reader
/// reads the durable log after its cursor (pages of at most 1000), so every seq goes out once and in order whatever
/// the timing; when it is caught up it waits on the server's one shared wake-up (``ServerSignals``) for a commit, and
/// writes a comment line when `heartbeat` seconds pass with none. Only that thread touches the stream.
final class EventStream {
    /// `MHD_CONTENT_READER_END_OF_STREAM`.
    static let endOfStream = -1
    /// `MHD_CONTENT_READER_END_WITH_ERROR`: the connection is closed without ending the chunked body, so the client
    /// sees a failure and reconnects with `Last-Event-ID`.
    static let endWithError = -2
    private static let pageSize = 1000

    private let core: ServerCore
    /// The last seq written to `pending`.
    private var cursor: Int64
    /// Bytes to send; `sent` of them are sent.
    private var pending: [UInt8] = []
    private var sent = 0
    /// The stream ends once `pending` is sent (pruned history).
    private var ending = false

    init(core: ServerCore, after: Int64) {
        self.core = core
        cursor = after
    }

    /// Copies up to `capacity` bytes into `buffer`, waiting until there are some; returns their count or how the
    /// stream ends.
    func read(into buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        while true {
            if core.signals.isStopping { return Self.endOfStream }
            if sent < pending.count {
                let count = min(capacity, pending.count - sent)
                pending.withUnsafeBytes { bytes in
                    guard let base = bytes.baseAddress else { return }
                    UnsafeMutableRawPointer(buffer).copyMemory(from: base + sent, byteCount: count)
                }
                sent += count
                return count
            }
            pending.removeAll(keepingCapacity: true)
            sent = 0
            if ending { return Self.endOfStream }
            do throws(FeedError) {
                try fill()
            } catch {
                if case .historyPruned(_, let through) = error {
                    pruned(through: through)
                } else {
                    if !core.signals.isStopping { core.log(.warning, "an event stream ended: \(error)") }
                    return core.signals.isStopping ? Self.endOfStream : Self.endWithError
                }
            }
        }
    }

    /// Reads the next page of the log into `pending`, or waits for a commit (a heartbeat when none comes).
    private func fill() throws(FeedError) {
        let events = try core.service.events(after: cursor, limit: Self.pageSize)
        if let first = events.first {
            // Seqs are dense: a first event past `cursor + 1` means the ones between were pruned.
            if cursor > 0, first.seq > cursor + 1 { return pruned(through: first.seq - 1) }
            for event in events {
                append("id: \(event.seq)\ndata: \(JSONShapes.event(event).rendered)\n\n")
            }
            cursor = events[events.count - 1].seq
            return
        }
        if cursor > 0, core.signals.lastSeq > cursor {
            // Nothing after the cursor although later seqs were committed: pruned, or committed since the read.
            let service = core.service
            let prunedThrough: Int64
            do {
                prunedThrough = try service.backend.readOnce { tx in try tx.replayBaseline().prunedThrough }
            } catch {
                throw FeedError.wrap(error)
            }
            if prunedThrough > cursor { return pruned(through: prunedThrough) }
            return  // read again: the commit is there now
        }
        if !core.signals.waitForCommit(after: cursor, timeout: Double(core.configuration.heartbeat)) {
            append(": keep-alive\n\n")
        }
    }

    private func pruned(through seq: Int64) {
        append("event: historyPruned\ndata: {\"prunedThrough\":\(seq)}\n\n")
        ending = true
    }

    private func append(_ text: String) {
        pending.append(contentsOf: text.utf8)
    }
}
