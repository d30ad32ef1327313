internal import Foundation
internal import FeedStorage

/// Delivers committed events in seq order, each once, even when several threads commit at once.
///
/// Writers ``reserve(after:)`` a slot while they hold the database's write lock, so slots are queued in commit
/// order; after the commit they ``complete(_:with:)`` the slot, or ``cancel(_:)`` it after a rollback. Whichever
/// thread finds the head of the queue complete delivers from it, outside every lock, until it meets an incomplete
/// slot. A writer returns only once its own events were delivered, so "the command returned" implies "every
/// subscriber saw it" — except when the writer runs inside a subscriber's callback (a nested delivery), where its
/// events follow right after the current one.
///
/// `@unchecked Sendable`: every stored property except `deliver` is guarded by `condition`; `deliver` is set once,
/// before the sequencer is shared.
final class EventSequencer: @unchecked Sendable {
    struct Ticket: Hashable { let id: UInt64 }

    private struct Slot {
        let ticket: Ticket
        var events: [EventRecord]?
    }

    private let condition = NSCondition()
    private var slots: [Slot] = []
    private var head = 0
    private var nextTicket: UInt64 = 0
    private var draining = false
    private var drainingThread: pthread_t?
    private var delivered: UInt64 = 0
    private var queuedSeq: Int64 = -1
    private var deliveredSeq: Int64 = 0
    var deliver: ([EventRecord]) -> Void = { _ in }

    /// The highest seq queued for delivery, or `nil` before the first reservation has been given a baseline.
    var lastQueuedSeq: Int64? {
        condition.lock()
        defer { condition.unlock() }
        return queuedSeq < 0 ? nil : queuedSeq
    }

    var lastDeliveredSeq: Int64 {
        condition.lock()
        defer { condition.unlock() }
        return deliveredSeq
    }

    /// Sets the seq after which delivery starts, if none was set yet.
    func setBaseline(_ seq: Int64) {
        condition.lock()
        if queuedSeq < 0 {
            queuedSeq = seq
            deliveredSeq = seq
        }
        condition.unlock()
    }

    /// Reserves the next slot; call while holding the write lock. `events` are appended later by ``complete``.
    func reserve() -> Ticket {
        condition.lock()
        defer { condition.unlock() }
        nextTicket += 1
        let ticket = Ticket(id: nextTicket)
        slots.append(Slot(ticket: ticket, events: nil))
        return ticket
    }

    /// Records that the events up to `seq` are queued (call under the write lock, with the reservation).
    func markQueued(through seq: Int64) {
        condition.lock()
        if seq > queuedSeq { queuedSeq = seq }
        condition.unlock()
    }

    /// Completes a slot with its committed events, delivers what is ready, and waits until the slot was delivered.
    func complete(_ ticket: Ticket, with events: [EventRecord]) {
        condition.lock()
        if let index = slots[head...].firstIndex(where: { $0.ticket == ticket }) {
            slots[index].events = events
        }
        drainOrWait(for: ticket)
    }

    /// Drops a slot whose transaction rolled back.
    func cancel(_ ticket: Ticket) {
        complete(ticket, with: [])
    }

    /// Called with `condition` locked; returns with it unlocked once `ticket` was delivered (or is due next in the
    /// current thread's own delivery loop).
    private func drainOrWait(for ticket: Ticket) {
        while delivered < ticket.id {
            if draining {
                if let drainingThread, pthread_equal(drainingThread, pthread_self()) != 0 {
                    // Nested inside a subscriber's callback on the delivering thread: its loop delivers this next.
                    break
                }
                condition.wait()
            } else if head < slots.count, slots[head].events != nil {
                drain()
            } else {
                // An earlier slot is still open; its writer delivers ours when it completes.
                condition.wait()
            }
        }
        condition.unlock()
    }

    /// Delivers complete slots from the head, outside the lock. Called and returns with `condition` locked.
    private func drain() {
        draining = true
        drainingThread = pthread_self()
        while head < slots.count, let events = slots[head].events {
            let ticketID = slots[head].ticket.id
            // Nothing reads a slot behind `head`: drop its events now rather than at the next compaction, which
            // comes only after 1024 transactions (with batched commands, up to 1024 × batch events retained).
            slots[head].events = []
            head += 1
            if head > 1024 && head * 2 > slots.count {
                slots.removeFirst(head)
                head = 0
            }
            condition.unlock()
            deliver(events)
            condition.lock()
            delivered = ticketID
            if let last = events.last?.seq, last > deliveredSeq { deliveredSeq = last }
            condition.broadcast()
        }
        draining = false
        drainingThread = nil
        condition.broadcast()
    }
}
