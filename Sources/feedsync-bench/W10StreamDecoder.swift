import Foundation

/// Where one of W10's streams is: connecting, writing its request, reading the answer's head, then its body.
enum HerdPhase {
    case connecting
    /// The request is being written; this many bytes of it are sent.
    case requesting(Int)
    case head
    case body
    case closed
}

/// One of W10's streams: its socket, and the decoder of its chunked body and SSE framing.
struct HerdStream {
    let fd: Int32
    var phase = HerdPhase.connecting
    var head: [UInt8] = []
    var chunks = ChunkDecoder()
    /// Decoded body bytes not yet split into lines.
    var text: [UInt8] = []
    /// The fields of the event being read.
    var id: Int64?
    var name: String?
    var hasFields = false
    /// The last seq received (`after` at first).
    var last: Int64

    var isClosed: Bool { if case .closed = phase { true } else { false } }

    /// Decodes body bytes, splits them into lines and handles each event that a blank line ends.
    mutating func read(_ body: ArraySlice<UInt8>, at now: UInt64, index: Int, into report: inout HerdReport) {
        chunks.feed(body, into: &text)
        var lineStart = 0
        while let newline = text[lineStart...].firstIndex(of: 10) {
            var line = text[lineStart..<newline]
            lineStart = newline + 1
            if line.last == 13 { line = line.dropLast() }
            if line.isEmpty {
                if hasFields { dispatch(index: index, at: now, into: &report) }
                continue
            }
            if line.first == 58 { continue }  // `:` starts a comment: the heartbeat
            let colon = line.firstIndex(of: 58) ?? line.endIndex
            var value = line[colon...].dropFirst()
            if value.first == 32 { value = value.dropFirst() }
            let field = String(decoding: line[..<colon], as: UTF8.self)
            hasFields = true
            // `SEQ.CHECK`: the seq is what the herd checks.
            if field == "id" { id = Int64(String(decoding: value.prefix { $0 != 46 }, as: UTF8.self)) }
            if field == "event" { name = String(decoding: value, as: UTF8.self) }
        }
        text.removeFirst(lineStart)
    }

    /// One complete event: it must be unnamed and carry the seq after the stream's last one.
    private mutating func dispatch(index: Int, at now: UInt64, into report: inout HerdReport) {
        defer { (id, name, hasFields) = (nil, nil, false) }
        if let name { return report.violations.append("stream \(index): event \(name)") }
        guard let seq = id else { return report.violations.append("stream \(index): an event without an id") }
        guard seq == last + 1 else { return report.violations.append("stream \(index): seq \(seq) after \(last)") }
        last = seq
        report.arrivals.append((seq, now))
    }
}

/// What changed during one wake-up of W10's reader thread, handed to the tally at once.
struct HerdReport {
    var opened = 0
    var failure: String?
    var arrivals: [(seq: Int64, at: UInt64)] = []
    var violations: [String] = []
    var ended: [String] = []
    var isEmpty: Bool { opened == 0 && failure == nil && arrivals.isEmpty && violations.isEmpty && ended.isEmpty }
}
