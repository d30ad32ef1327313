internal import CMicroHTTPD
internal import FeedJSON
internal import FeedSync
internal import Foundation

/// One `GET /api/events` stream: a suspended connection and a cursor, not a thread (`Docs/HTTP.md`).
///
/// libmicrohttpd calls ``read(into:capacity:)`` on an I/O thread when the socket can take more. The reader sends its
/// own bytes first (a catch-up page, a heartbeat, a final event), then whole frames of the shared tail after its cursor
/// (``StreamHub/copy(after:for:into:capacity:)``). With nothing to send it suspends the connection and returns 0; a
/// commit, a heartbeat, a hang-up or the server's stop resumes it (``wake()``). A cursor older than the tail is read
/// from the log on a worker, a page at a time (a stream that starts behind); a stream that was live and fell behind the
/// tail — its client stopped reading — ends with `event: behind`.
///
/// Each suspension is resumed exactly once: the reader suspends and sets `suspended` under `lock`; a waker that finds
/// `suspended` set clears it and resumes after unlocking. The connection stays suspended (so alive) until that resume.
///
/// `@unchecked Sendable`: every stored `var` is read and written only with `lock` held.
final class EventStream: @unchecked Sendable {
    /// `MHD_CONTENT_READER_END_OF_STREAM`.
    static let endOfStream = -1
    /// `MHD_CONTENT_READER_END_WITH_ERROR`: closed without ending the chunked body, so the client sees a failure and
    /// reconnects with `Last-Event-ID`.
    static let endWithError = -2
    /// Events a catch-up read takes from the log at once.
    static let catchUpPage = 500

    let id: Int
    let viewerID: String
    /// ``StreamHub/erasureCount`` before the stream's token was looked up.
    let erasuresBefore: Int
    /// ``StreamHub/rewriteCount`` before the stream looked at the log: a rewrite found after it ends the stream.
    let rewritesBefore: Int
    private let hub: StreamHub
    private let workers: WorkerPool
    private let lock = NSLock()
    /// The last seq written to `pending` or copied to the socket.
    private var cursor: Int64
    /// The check of the log's event at `cursor` (``FeedCore/EventRecord/check``), once the stream read or copied it,
    /// or from the `Last-Event-ID` it was asked for: each later read of the log or the tail starts by checking it.
    private var cursorCheck: Int64?
    /// This stream's own bytes to send; `sent` of them are sent.
    private var pending: [UInt8] = []
    private var sent = 0
    /// The stream ends once `pending` is sent.
    private var ending = false
    /// The stream ends at once, unfinished (a hang-up, a failed read).
    private var failed = false
    /// The stream read from the tail at least once.
    private var live = false
    private var catchingUp = false
    private var suspended = false
    private var heartbeats = 0
    /// The viewer was erased: the stream ends with `event: erased` once its cursor reaches this seq.
    private var endsAfter = Int64.max
    private var connection: OpaquePointer?

    init(
        id: Int, viewerID: String, erasuresBefore: Int, rewritesBefore: Int, after: Int64, afterCheck: Int64?, hub: StreamHub,
        workers: WorkerPool
    ) {
        self.rewritesBefore = rewritesBefore
        cursorCheck = afterCheck
        self.id = id
        self.viewerID = viewerID
        self.erasuresBefore = erasuresBefore
        cursor = after
        self.hub = hub
        self.workers = workers
    }

    /// Binds the stream to its connection, just before its response is queued (on the I/O thread).
    func attach(_ connection: OpaquePointer) {
        lock.lock()
        self.connection = connection
        lock.unlock()
    }

    /// Forgets the connection: libmicrohttpd finished the request (it is never suspended then).
    func detach() {
        lock.lock()
        connection = nil
        suspended = false
        lock.unlock()
    }

    /// The client hung up (the hang-up watch): the stream ends at its next read.
    func hungUp() {
        lock.lock()
        failed = true
        lock.unlock()
        wake()
    }

    /// The viewer was erased: the stream sends the events through `seq`, then `event: erased`, and ends.
    func end(after seq: Int64) {
        lock.lock()
        endsAfter = min(endsAfter, seq)
        lock.unlock()
        wake()
    }

    /// The stream was asked for after a position on another history of the log (its seq is beyond the head, or its id
    /// names an event the log no longer holds under that seq): it sends `event: historyRewritten` and ends.
    func endRewritten(head: Int64) {
        lock.lock()
        endRewrittenLocked(head: head)
        lock.unlock()
        wake()
    }

    /// Queues `event: historyRewritten` with the stream's last id and the new log's head, and ends after it (with
    /// `lock` held).
    private func endRewrittenLocked(head: Int64) {
        guard !ending else { return }
        pending += Array("event: historyRewritten\ndata: {\"lastEventID\":\(cursor),\"head\":\(head)}\n\n".utf8)
        ending = true
    }

    /// Resumes the connection if it is suspended; otherwise its reader runs anyway.
    func wake() {
        lock.lock()
        let resume = suspended ? connection : nil
        suspended = false
        lock.unlock()
        if let resume {
            hub.metrics.suspendedStreams.add(-1)
            MHD_resume_connection(resume)
        }
    }

    /// libmicrohttpd's content reader: up to `capacity` bytes into `buffer`, 0 after suspending, or how it ends.
    func read(into buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        lock.lock()
        defer { lock.unlock() }
        let count = fill(UnsafeMutableRawPointer(buffer), capacity: capacity)
        if count > 0 { hub.metrics.streamBytes.add(Int64(count)) }
        return count
    }

    private func fill(_ buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
        while true {
            if failed { return Self.endWithError }
            if sent < pending.count {
                let count = min(capacity, pending.count - sent)
                pending.withUnsafeBytes { bytes in
                    if let base = bytes.baseAddress { buffer.copyMemory(from: base + sent, byteCount: count) }
                }
                sent += count
                return count
            }
            pending.removeAll(keepingCapacity: pending.count <= 16 << 10)
            sent = 0
            if ending { return Self.endOfStream }
            if let head = hub.rewrite(since: rewritesBefore) {
                // The log was rewritten since the stream began: nothing more of it is sent.
                endRewrittenLocked(head: head)
                continue
            }
            if cursor >= endsAfter {
                pending = Array("event: erased\ndata: {\"lastEventID\":\(cursor)}\n\n".utf8)
                ending = true
                continue
            }
            switch hub.copy(after: cursor, check: cursorCheck, through: endsAfter, for: viewerID, into: buffer, capacity: capacity) {
            case .stopping:
                return Self.endOfStream
            case .copied(let count, let through, let check):
                if through > cursor { cursorCheck = check }
                cursor = through
                live = true
                return count
            case .oversized(let bytes, let seq, let check):
                pending = bytes
                cursor = seq
                cursorCheck = check
                live = true
            case .rewritten(let head):
                endRewrittenLocked(head: head)
            case .behind:
                if live {
                    hub.metrics.streamsBehind.add()
                    pending = Array("event: behind\ndata: {\"lastEventID\":\(cursor)}\n\n".utf8)
                    ending = true
                } else {
                    return catchUp()
                }
            case .nothing(let generation):
                if generation > heartbeats {
                    heartbeats = generation
                    pending = Array(": keep-alive\n\n".utf8)
                } else {
                    return suspend()
                }
            }
        }
    }

    /// Suspends the connection until ``wake()`` (with `lock` held, so no waker resumes it before it is suspended).
    private func suspend() -> Int {
        guard let connection else { return Self.endWithError }
        MHD_suspend_connection(connection)
        suspended = true
        hub.metrics.suspendedStreams.add(1)
        return 0
    }

    /// Reads the next page after the cursor from the log on a worker, suspended meanwhile.
    private func catchUp() -> Int {
        guard !catchingUp else { return suspend() }
        let (from, fromCheck, last) = (cursor, cursorCheck, endsAfter)
        let submitted = workers.submit { [self] stopping in
            let (bytes, through, check, end) =
                stopping ? ([], from, fromCheck, Ending.stop) : readPage(after: from, check: fromCheck, through: last)
            lock.lock()
            catchingUp = false
            if ending || hub.rewrite(since: rewritesBefore) != nil {
                // Ended meanwhile, or the log was rewritten while the page was read: it may hold the new history.
                lock.unlock()
                wake()
                return
            }
            pending.append(contentsOf: bytes)
            if through > cursor { cursorCheck = check }
            cursor = max(cursor, through)
            switch end {
            case .none: break
            case .stop, .pruned: ending = true
            case .rewritten(let head): endRewrittenLocked(head: head)
            case .failure: failed = true
            }
            lock.unlock()
            wake()
        }
        // A full worker queue: the stream ends unfinished and its client reconnects later with Last-Event-ID.
        guard submitted else {
            hub.metrics.rejected.add("workers")
            return Self.endWithError
        }
        catchingUp = true
        return suspend()
    }

    private enum Ending {
        case stop, pruned, rewritten(head: Int64), failure
    }

    /// One page of the log after `seq` and up to `last`, encoded for the viewer (on a worker, without `lock`), with the
    /// check of its last event. With `check`, the page starts at `seq` itself, whose event must still be the one read
    /// before: otherwise the log was rewritten in between, and the stream ends with `event: historyRewritten`.
    private func readPage(
        after seq: Int64, check: Int64?, through last: Int64
    ) -> (bytes: [UInt8], through: Int64, check: Int64?, end: Ending?) {
        let service = hub.service
        hub.metrics.catchUpReads.add()
        do {
            let verify = check != nil && seq > 0
            var events = try service.events(after: verify ? seq - 1 : seq, limit: Self.catchUpPage + (verify ? 1 : 0))
            if verify, let first = events.first, first.seq == seq {
                guard first.check == check else { return ([], seq, check, .rewritten(head: try service.logHead())) }
                events.removeFirst()
            }
            events = events.filter { $0.seq <= last }
            if let first = events.first, let final = events.last {
                // Seqs are dense: a first event past `seq + 1` means the ones between were pruned.
                if seq > 0, first.seq > seq + 1 { return (Self.pruned(through: first.seq - 1), seq, check, .pruned) }
                var bytes: [UInt8] = []
                for event in events { bytes += TailFrame.encode(event.seen(by: viewerID)) }
                return (bytes, final.seq, final.check, nil)
            }
            // Nothing after `seq` although the tail is past it: pruned, or the log's head is now below `seq`.
            let head = try service.logHead()
            if head < seq { return ([], seq, check, .rewritten(head: head)) }
            let prunedThrough = try service.backend.readOnce { tx in try tx.replayBaseline().prunedThrough }
            if prunedThrough > seq { return (Self.pruned(through: prunedThrough), seq, check, .pruned) }
            return ([], seq, check, .failure)
        } catch {
            if !hub.isStopping { hub.log("an event stream's catch-up read failed: \(error)") }
            return ([], seq, check, .failure)
        }
    }

    private static func pruned(through seq: Int64) -> [UInt8] {
        Array("event: historyPruned\ndata: {\"prunedThrough\":\(seq)}\n\n".utf8)
    }
}
