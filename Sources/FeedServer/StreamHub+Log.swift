internal import FeedSync

/// The fan-out's reads of the log that need none of its state (on the fan-out thread).
extension StreamHub {
    /// The log's event at `seq`, if it holds one and can be read now.
    func event(at seq: Int64) -> EventRecord? {
        guard seq > 0, let page = try? service.events(after: seq - 1, limit: 1) else { return nil }
        return page.first { $0.seq == seq }
    }

    /// Ends, after `seq`, the streams whose viewer no longer exists: an erasure names nobody in the log, so every
    /// server learns whose streams to end by looking their viewers up (one read for all of them).
    func endErasedViewers(of streams: [EventStream], after seq: Int64) {
        let viewers = Set(streams.map(\.viewerID))
        let gone: Set<String>
        do {
            gone = try viewers.subtracting(service.backend.readOnce { tx in try tx.deletion.existingUserIDs(Array(viewers)) })
        } catch {
            log("the event streams' look-up of erased viewers failed: \(error)")
            return
        }
        for stream in streams where gone.contains(stream.viewerID) { stream.end(after: seq) }
    }
}
