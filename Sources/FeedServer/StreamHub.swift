internal import FeedJSON
internal import FeedSync
internal import Foundation
internal import Synchronization

/// The fan-out: one read of the log per commit for every stream of the server, and the shared tail of encoded events
/// that the streams copy from (`Docs/HTTP.md`, "The event stream").
///
/// The bridge's one sink calls ``noteCommitted(_:)`` (on its own queue; it only records the seq and signals).
/// The fan-out thread then reads the log after the last seq it has — once, however many streams are open — encodes
/// each event once per visibility into ``TailFrame``s, appends them to the tail (the newest `capacity` events), and
/// wakes every stream that waits. A stream's reader, on an I/O thread, copies whole frames after its cursor with
/// ``copy(after:for:into:capacity:)``. A stream whose cursor is older than the tail catches up from the log on a
/// worker (a stream that starts behind) or is ended with `event: behind` (a live stream that fell behind).
///
/// A read that brings a `userDeleted` event also reads the tail's older events again, which the erasure scrubbed of
/// the user's id, and ends the streams whose viewer no longer exists (`event: erased`): the event names nobody, so
/// every server finds them by looking its streams' viewers up.
///
/// Locks: `condition` guards everything here; a stream's reader takes it inside the stream's own lock, never the
/// other way round: the fan-out and ``stop()`` take a snapshot of the streams under it and wake them after unlocking.
///
/// `@unchecked Sendable`: every stored `var` is read and written only with `condition` locked (`rewritesSoFar` is an
/// atomic copy of `rewrites`, written with it).
final class StreamHub: @unchecked Sendable {
    private let condition = NSCondition()
    private var frames: [TailFrame] = []
    /// The seq of `frames.first`, or `lastSeq + 1` when the tail is empty.
    private var firstSeq: Int64
    /// The last seq in the tail: every seq up to it was read.
    private var lastSeq: Int64
    /// The highest seq the bridge announced.
    private var announced: Int64
    private var streams: [Int: EventStream] = [:]
    private var generation = 0
    private var stopping = false
    private var nextStreamID = 1
    /// Erasures read from the log so far.
    private var erasures = 0
    /// The tail's last event, to check that the log still holds it before reading on.
    private var lastEvent: EventRecord?
    /// Rewrites of the log found so far, and the new log's head at the last one.
    private var rewrites = 0
    private var rewriteHead: Int64 = 0
    /// `rewrites`, also readable without `condition`: every stream's reader asks it at each read.
    private let rewritesSoFar = Atomic<Int>(0)
    /// The bridge found a rewrite (``checkForRewrite()``).
    private var checkRequested = false

    let service: FeedService
    let capacity: Int
    let heartbeat: Double
    let metrics: ServerMetrics
    let log: @Sendable (String) -> Void
    private var thread: Thread?

    /// Starts the fan-out thread at `lastSeq`, the log's head when the server starts.
    init(
        service: FeedService, lastSeq: Int64, capacity: Int, heartbeat: Double, metrics: ServerMetrics,
        log: @escaping @Sendable (String) -> Void
    ) {
        self.service = service
        self.lastSeq = lastSeq
        announced = lastSeq
        firstSeq = lastSeq + 1
        self.capacity = max(capacity, 1)
        self.heartbeat = heartbeat
        self.metrics = metrics
        self.log = log
        metrics.lastSeq.set(lastSeq)
        let thread = Thread { [self] in run() }
        thread.name = "feedsync-fanout"
        thread.start()
    }

    // MARK: - Called from other threads

    /// Records a committed seq and wakes the fan-out (the bridge sink; never waits).
    func noteCommitted(_ seq: Int64) {
        condition.lock()
        if seq > announced {
            announced = seq
            condition.signal()
        }
        condition.unlock()
    }

    var isStopping: Bool {
        condition.withLock { stopping }
    }

    /// Ends every stream (each is woken and finds the hub stopping) and stops the fan-out thread.
    func stop() {
        condition.lock()
        stopping = true
        let all = Array(streams.values)
        condition.broadcast()
        condition.unlock()
        for stream in all { stream.wake() }
    }

    /// Ends the streams of `viewerID`, who was erased, after the events through `seq` (`event: erased`).
    func endStreams(of viewerID: String, after seq: Int64) {
        condition.lock()
        let ended = streams.values.filter { $0.viewerID == viewerID }
        condition.unlock()
        for stream in ended { stream.end(after: seq) }
    }

    /// The last seq the fan-out read: a stream asking for a later one checks the log's head.
    var tailHead: Int64 {
        condition.withLock { lastSeq }
    }

    /// Rewrites of the log found so far: a stream takes the count before it looks at the log.
    var rewriteCount: Int {
        condition.withLock { rewrites }
    }

    /// The new log's head when the log was rewritten since `count` (``rewriteCount``); `nil` otherwise.
    func rewrite(since count: Int) -> Int64? {
        guard rewritesSoFar.load(ordering: .acquiring) > count else { return nil }
        condition.lock()
        defer { condition.unlock() }
        return rewrites > count ? rewriteHead : nil
    }

    /// The bridge found the log rewritten: the fan-out thread checks its tail against the log. Only that thread
    /// declares a rewrite, once: a stream begun after it found one must not be ended when the bridge's word arrives.
    func checkForRewrite() {
        condition.lock()
        checkRequested = true
        condition.signal()
        condition.unlock()
    }

    /// The log was rewritten under the server (a failover to a standby that lacked the last commits, or a restore):
    /// the tail restarts after `head`, the new log's last seq, and every stream that began before ends with `event:
    /// historyRewritten` (its reader finds the rewrite when woken, before it copies or reads anything more), so that
    /// its client starts again from the tables instead of going on from a seq that now names another event.
    /// On the fan-out thread only; the tail remembers the new log's event at `head`, to check it at the next look.
    private func rewritten(head: Int64) {
        let atHead = event(at: head)
        condition.lock()
        frames.removeAll()
        lastSeq = head
        firstSeq = head + 1
        announced = head
        lastEvent = atHead
        rewrites += 1
        rewriteHead = head
        rewritesSoFar.store(rewrites, ordering: .releasing)
        let all = Array(streams.values)
        condition.unlock()
        metrics.lastSeq.set(head)
        log(
            "the log was rewritten (a failover or a restore): the event streams go on after seq \(head); \(all.count) open streams were ended"
        )
        for stream in all { stream.wake() }
    }

    /// A new stream's id.
    func makeStreamID() -> Int {
        condition.lock()
        defer { condition.unlock() }
        nextStreamID += 1
        return nextStreamID
    }

    /// Erasures read from the log so far: a stream's token is looked up after this count is taken.
    var erasureCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return erasures
    }

    /// Adds a stream that the fan-out wakes; `false` when the server stops, or when an erasure was read since its token
    /// was looked up (its user may be the one erased, and the look-up of erased users has not seen the stream).
    func register(_ stream: EventStream) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopping, stream.erasuresBefore == erasures else { return false }
        streams[stream.id] = stream
        metrics.openStreams.set(Int64(streams.count))
        return true
    }

    func unregister(_ id: Int) {
        condition.lock()
        defer { condition.unlock() }
        streams[id] = nil
        metrics.openStreams.set(Int64(streams.count))
    }

    /// Copies the frames after `cursor` and up to `through`, as `viewerID` sees them, into `buffer` (on an I/O thread).
    /// `check` is the check of the log's event at `cursor` as the stream last read it, when it knows it: a tail that
    /// holds another event there answers ``Read/rewritten(head:)``.
    func copy(
        after cursor: Int64, check: Int64? = nil, through last: Int64 = .max, for viewerID: String, into buffer: UnsafeMutableRawPointer,
        capacity: Int
    ) -> Read {
        var latencies: [Double] = []
        let now = Date()
        let read = { () -> Read in
            condition.lock()
            defer { condition.unlock() }
            if stopping { return .stopping }
            if cursor >= lastSeq { return .nothing(generation: generation) }
            if cursor + 1 < firstSeq { return .behind }
            if let check, cursor >= firstSeq, frames[Int(cursor - firstSeq)].check != check { return .rewritten(head: lastSeq) }
            var index = Int(cursor + 1 - firstSeq)
            var count = 0
            var through = cursor
            var throughCheck = check ?? 0
            while index < frames.count, frames[index].seq <= last {
                let frame = frames[index]
                let bytes = frame.bytes(for: viewerID)
                if count + bytes.count > capacity {
                    if count == 0 { return .oversized(bytes, seq: frame.seq, check: frame.check) }
                    break
                }
                bytes.withUnsafeBytes { source in
                    if let base = source.baseAddress { (buffer + count).copyMemory(from: base, byteCount: source.count) }
                }
                count += bytes.count
                through = frame.seq
                throughCheck = frame.check
                latencies.append(max(0, now.timeIntervalSince(frame.committed)))
                index += 1
            }
            return .copied(count: count, through: through, check: throughCheck)
        }()
        for latency in latencies { metrics.deliveryLatency.observe(latency) }
        if !latencies.isEmpty { metrics.streamEvents.add(Int64(latencies.count)) }
        return read
    }

    // MARK: - The fan-out thread

    /// Seconds between looks at the log's head: a commit the bridge did not announce (one made before the service's
    /// watch started) reaches the streams within this bound.
    static let headCheckInterval = 1.0

    /// Checks the tail against the log: a head below the tail's or a seq announced, or (`againstEvent`) another event
    /// at the tail's last seq than the one it holds, is a rewrite; otherwise a head beyond it is announced.
    private func checkTail(againstEvent: Bool) {
        // A seq the bridge announced was committed before: a head read after it below it is a rewrite too (a stream
        // may have read that seq from the log before the fan-out did).
        let announcedBefore = condition.withLock { announced }
        guard let head = try? service.backend.readOnce({ tx in try tx.lastSeq() }) else { return }
        condition.lock()
        let (tailSeq, tailEvent) = (lastSeq, lastEvent?.seq == lastSeq ? lastEvent : nil)
        condition.unlock()
        if head < max(tailSeq, announcedBefore) {
            rewritten(head: head)
        } else if againstEvent, let tailEvent, event(at: tailSeq).map({ $0.isSameEvent(as: tailEvent) }) == false {
            rewritten(head: head)
        } else {
            noteCommitted(head)
        }
    }

    private func run() {
        if let atStart = event(at: tailHead) {
            condition.lock()
            if lastSeq == atStart.seq, lastEvent == nil { lastEvent = atStart }
            condition.unlock()
        }
        var nextHeartbeat = Date(timeIntervalSinceNow: heartbeat)
        var nextHeadCheck = Date(timeIntervalSinceNow: Self.headCheckInterval)
        var retryAfter: Date?
        while true {
            condition.lock()
            while !stopping, !checkRequested, announced <= lastSeq || (retryAfter.map { $0 > Date() } ?? false),
                Date() < nextHeartbeat, Date() < nextHeadCheck
            {
                _ = condition.wait(until: min(nextHeartbeat, nextHeadCheck, retryAfter ?? nextHeartbeat))
            }
            if stopping {
                condition.unlock()
                return
            }
            let heartbeatDue = Date() >= nextHeartbeat
            let headCheckDue = Date() >= nextHeadCheck
            let checkDue = checkRequested
            checkRequested = false
            condition.unlock()

            if headCheckDue { nextHeadCheck = Date(timeIntervalSinceNow: Self.headCheckInterval) }
            if headCheckDue || checkDue { checkTail(againstEvent: checkDue) }
            condition.lock()
            let from = lastSeq
            let wanted = announced > lastSeq && (retryAfter.map { $0 <= Date() } ?? true)
            condition.unlock()

            if wanted {
                retryAfter = readAndFanOut(after: from) ? nil : Date(timeIntervalSinceNow: 0.05)
            }
            if heartbeatDue {
                nextHeartbeat = Date(timeIntervalSinceNow: heartbeat)
                condition.lock()
                generation += 1
                let all = Array(streams.values)
                condition.unlock()
                for stream in all { stream.wake() }
            }
        }
    }

    /// One read of the log after `seq` into the tail, then every stream woken; `false` to retry shortly.
    private func readAndFanOut(after seq: Int64) -> Bool {
        var events: [EventRecord]
        condition.lock()
        let tailEvent = lastEvent?.seq == seq ? lastEvent : nil
        condition.unlock()
        do {
            // From the tail's last event, when it has one: the log must still hold it as it was.
            events = try service.events(after: tailEvent == nil ? seq : seq - 1, limit: 1000)
            metrics.logReads.add()
            if let tailEvent {
                if let first = events.first, first.seq == seq {
                    guard first.isSameEvent(as: tailEvent) else {
                        rewritten(head: try service.logHead())
                        return true
                    }
                    events.removeFirst()
                } else if events.isEmpty, case let head = try service.logHead(), head < seq {
                    rewritten(head: head)
                    return true
                }
            }
        } catch {
            log("the event streams' read of the log failed (retrying): \(error)")
            return false
        }
        guard let first = events.first, let last = events.last else {
            // A later seq was announced but nothing follows `seq`: pruned, or not visible to this read yet.
            let prunedThrough = (try? service.backend.readOnce { tx in try tx.replayBaseline().prunedThrough }) ?? 0
            guard prunedThrough > seq else { return false }
            condition.lock()
            frames.removeAll()
            lastSeq = max(lastSeq, prunedThrough)
            firstSeq = lastSeq + 1
            condition.unlock()
            return true
        }
        let encoded = events.map(TailFrame.init)
        metrics.tailEvents.add(Int64(encoded.count))
        let erasure = events.contains { $0.kind == .userDeleted }
        // An erasure scrubbed its user's id from every earlier event: the tail's older frames are read again.
        let scrubbed = erasure ? rereadTail(before: first.seq) : nil
        condition.lock()
        if first.seq != lastSeq + 1 {
            // A gap (pruned history): the tail restarts; older cursors catch up from the log and learn of the pruning.
            frames.removeAll()
            firstSeq = first.seq
        } else if erasure {
            if let scrubbed, (scrubbed.first?.seq ?? firstSeq) == firstSeq, scrubbed.count == frames.count {
                frames = scrubbed
            } else {
                // The tail could not be read again: its older frames go; older cursors catch up from the (scrubbed) log.
                frames.removeAll()
                firstSeq = first.seq
            }
        }
        frames.append(contentsOf: encoded)
        lastSeq = last.seq
        lastEvent = last
        if erasure { erasures += 1 }
        if frames.count > capacity + capacity / 4 {
            let drop = frames.count - capacity
            frames.removeFirst(drop)
            firstSeq += Int64(drop)
        }
        let all = Array(streams.values)
        condition.unlock()
        metrics.lastSeq.set(last.seq)
        if erasure { endErasedViewers(of: all, after: last.seq) }
        for stream in all { stream.wake() }
        return true
    }

    /// The tail's frames before `seq`, read again from the log (after an erasure scrubbed it); `nil` when the log no
    /// longer holds them all.
    private func rereadTail(before seq: Int64) -> [TailFrame]? {
        condition.lock()
        var after = firstSeq - 1
        condition.unlock()
        var fresh: [TailFrame] = []
        while after < seq - 1 {
            guard let page = try? service.events(after: after, limit: 1000), let first = page.first, first.seq == after + 1 else {
                return nil
            }
            metrics.logReads.add()
            for event in page where event.seq < seq { fresh.append(TailFrame(event)) }
            after = page[page.count - 1].seq
        }
        return fresh
    }
}
