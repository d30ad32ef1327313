internal import FeedCore

extension EventSequencer {
    /// The committed ranges not yet handed to the delivering thread, and how far delivery got.
    ///
    /// A range keeps its events in memory while the backlog holds fewer than its limit; beyond it (a slow subscriber
    /// holds delivery up while commits go on) a range keeps only its bounds, `(after, through]`, and delivery reads its
    /// events from the log when it gets there. Ranges without events that touch are merged, so that a backlog that
    /// fell behind holds one range however many commits arrive.
    struct Backlog {
        struct Range {
            let after: Int64
            let through: Int64
            /// The range's events, or `nil` when delivery reads them from the log.
            let events: [EventRecord]?
            /// Whether this is a stretch of the log that a local commit's events end but do not begin (another
            /// process's commits, or a local writer's whose range is still on its way, came first): read from the
            /// log, where a range with its events does not bring them before delivery gets there.
            var isGap = false
        }

        /// The highest seq delivered (every callback for it returned).
        var delivered: Int64 = -1
        /// The highest seq handed to the delivering thread.
        var taken: Int64 = -1
        /// The highest seq of any range submitted.
        var known: Int64 = -1
        /// Ranges not yet handed over, in submission order (a handful: one per concurrent writer, and at most one
        /// merged range without events per stretch of the log).
        private(set) var ranges: [Range] = []
        /// The events the ranges hold in memory.
        private(set) var buffered = 0
        /// Whether ranges are being kept without their events (and this was reported).
        private var fallingBehind = false
        /// A rewrite of the log found since the last batch was taken: the next batch hands it over.
        private var pendingRewrite: HistoryRewrite?

        /// Drops what waits for delivery and goes on after `head` of a rewritten log; the next batch carries the
        /// rewrite, so every subscriber's queue gets it after the old history's events and before the new ones.
        mutating func rebase(to head: Int64) -> HistoryRewrite {
            let rewrite = HistoryRewrite(after: max(known, taken, delivered), head: head)
            ranges = []
            buffered = 0
            fallingBehind = false
            known = head
            taken = head
            pendingRewrite = rewrite
            return rewrite
        }

        /// Adds a complete range of committed events. With a `limit` (the events can be read back from the log), a
        /// range that would take the backlog beyond it — or that comes after a range kept without events — is kept
        /// without events.
        ///
        /// - Returns: how many of `events` were not known before, and whether the backlog began to fall behind.
        mutating func submit(after: Int64, through: Int64, events: [EventRecord], limit: Int?) -> (added: Int, fellBehind: Bool) {
            // Ranges may arrive out of commit order when several connections commit at once (PostgreSQL): a range
            // at or below what was handed to the delivering thread is old news; any other is kept until `next()`
            // reaches it.
            guard through > taken else { return (0, false) }
            let previous = known
            known = max(known, through)
            let added = events.count - (events.firstIndex { $0.seq > previous } ?? events.count)
            if let limit, buffered + events.count > limit || ranges.contains(where: { $0.events == nil && !$0.isGap }) {
                addWithoutEvents(after: after, through: through)
                defer { fallingBehind = true }
                return (added, !fallingBehind)
            }
            ranges.append(Range(after: after, through: through, events: events))
            buffered += events.count
            return (added, false)
        }

        /// Adds the events a local transaction appended, `events` non-empty and in seq order. When they do not follow
        /// the highest seq known, events committed elsewhere came first and were not submitted yet: the stretch from
        /// the highest seq known through these events is kept as one gap (see ``Range/isGap``), merged with the gaps
        /// it touches, and delivery reads it from the log — unless ranges with the events of its start arrive first.
        /// Gaps that follow one another while delivery lags make one range, so the backlog stays small.
        mutating func submitCommitted(_ events: [EventRecord], limit: Int?) -> (added: Int, fellBehind: Bool) {
            let after = events[events.startIndex].seq - 1
            let through = events[events.endIndex - 1].seq
            guard known >= 0, known < after, taken < after else {
                return submit(after: after, through: through, events: events, limit: limit)
            }
            var gap = Range(after: max(known, taken), through: through, events: nil, isGap: true)
            known = through
            while let index = ranges.firstIndex(where: { $0.isGap && $0.after <= gap.through && gap.after <= $0.through }) {
                let range = ranges.remove(at: index)
                gap = Range(after: min(range.after, gap.after), through: max(range.through, gap.through), events: nil, isGap: true)
            }
            ranges.append(gap)
            return (events.count, false)
        }

        /// Takes what a local transaction committed across a rewrite of the log (it began before the last rebase): its
        /// events may be the old history's, so only the stretch after the highest seq known is kept, as a gap that
        /// delivery reads from the log (whose events it then has are the new history's).
        mutating func submitAcrossRewrite(through: Int64) -> (added: Int, fellBehind: Bool) {
            guard known >= 0, through > known, through > taken else { return (0, false) }
            ranges.append(Range(after: max(known, taken), through: through, events: nil, isGap: true))
            known = through
            return (0, false)
        }

        /// The next batch to deliver, in seq order, or `nil` when the next range is still missing. A batch with
        /// ``Batch/loadAfter`` set carries no events: its range is read from the log.
        mutating func next() -> Batch? {
            if let rewrite = pendingRewrite {
                pendingRewrite = nil
                return Batch(events: [], through: rewrite.head, loadAfter: nil, rewrite: rewrite)
            }
            let taken = self.taken
            drop { $0.through <= taken }
            // A range with its events before a gap over the same seqs: the gap is read from the log only if no
            // writer brought its events.
            let startsHere = { (range: Range) in range.after <= taken }
            guard let index = ranges.firstIndex(where: { startsHere($0) && !$0.isGap }) ?? ranges.firstIndex(where: startsHere)
            else { return nil }
            let range = ranges.remove(at: index)
            buffered -= range.events?.count ?? 0
            if !ranges.contains(where: { $0.events == nil && !$0.isGap }) { fallingBehind = false }
            let from = taken
            self.taken = range.through
            guard let events = range.events else { return Batch(events: [], through: range.through, loadAfter: from) }
            let start = events.firstIndex { $0.seq > from } ?? events.endIndex
            return Batch(events: events[start...], through: range.through, loadAfter: nil)
        }

        /// Records that `batch` was delivered: every event up to its end, or, for a rewrite, the new log's head.
        mutating func finish(_ batch: Batch) {
            if batch.rewrite != nil {
                delivered = batch.through
            } else if batch.through > delivered {
                delivered = batch.through
            }
        }

        /// Puts back the part of a range read from the log that was not delivered, `(after, through]`, to be read
        /// again first.
        mutating func requeue(after: Int64, through: Int64) {
            taken = after
            ranges.insert(Range(after: after, through: through, events: nil), at: 0)
            fallingBehind = true
        }

        /// Keeps `(after, through]` as a range without events, merged with those it touches.
        private mutating func addWithoutEvents(after: Int64, through: Int64) {
            var merged = Range(after: after, through: through, events: nil)
            var grew = true
            while grew {
                grew = false
                if let index = ranges.firstIndex(where: { $0.events == nil && $0.after <= merged.through && merged.after <= $0.through }) {
                    let range = ranges.remove(at: index)
                    merged = Range(after: min(range.after, merged.after), through: max(range.through, merged.through), events: nil)
                    grew = true
                }
            }
            ranges.append(merged)
        }

        /// Removes the ranges `shouldDrop` selects, keeping ``buffered`` right.
        private mutating func drop(where shouldDrop: (Range) -> Bool) {
            var removed = 0
            ranges.removeAll { range in
                guard shouldDrop(range) else { return false }
                removed += range.events?.count ?? 0
                return true
            }
            buffered -= removed
        }
    }
}
