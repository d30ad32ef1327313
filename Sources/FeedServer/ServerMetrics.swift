internal import FeedDomain
internal import Foundation
internal import Synchronization

/// The server's Prometheus metrics (`GET /metrics`, `Docs/HTTP.md`, "Metrics").
///
/// Names follow Prometheus' conventions: `feedsync_` prefix, base units (`_seconds`, `_bytes`), `_total` for counters.
/// Label values come from small fixed sets (a route's name, a status code, a rejection's reason) — never a user id, a
/// token or a path. Every method may be called from any thread; each metric has its own lock, held only to add.
final class ServerMetrics: Sendable {
    /// Counters and gauges by name.
    let openConnections = Gauge()
    let openStreams = Gauge()
    let suspendedStreams = Gauge()
    let lastSeq = Gauge()
    let queuedJobs = Gauge()
    let busyWorkers = Gauge()
    let logReads = Counter()
    let catchUpReads = Counter()
    let tailEvents = Counter()
    let streamEvents = Counter()
    let streamBytes = Counter()
    let streamsBehind = Counter()
    let requests = LabeledCounter(labels: ["route", "status"])
    let rejected = LabeledCounter(labels: ["reason"])
    let requestDuration = LabeledHistogram(label: "route", bounds: ServerMetrics.latencyBounds)
    let deliveryLatency = Histogram(bounds: ServerMetrics.latencyBounds)
    let workerWait = Histogram(bounds: ServerMetrics.latencyBounds)
    let databaseCall = Histogram(bounds: ServerMetrics.latencyBounds)

    /// Latency buckets in seconds: 0.5 ms to 10 s.
    static let latencyBounds: [Double] = [
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]

    /// The text exposition format, version 0.0.4.
    func render() -> String {
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        func sample(_ name: String, _ value: Int64) { out += "\(name) \(value)\n" }

        family("feedsync_http_connections", "gauge", "Open HTTP connections, event streams included.")
        sample("feedsync_http_connections", openConnections.value)
        family("feedsync_http_streams", "gauge", "Open event streams (GET /api/events).")
        sample("feedsync_http_streams", openStreams.value)
        family("feedsync_http_streams_waiting", "gauge", "Event streams caught up and suspended until the next commit.")
        sample("feedsync_http_streams_waiting", suspendedStreams.value)
        family("feedsync_http_requests_total", "counter", "Requests answered, by route and status.")
        out += requests.rendered(name: "feedsync_http_requests_total")
        family("feedsync_http_rejected_total", "counter", "Requests refused with 503 before any work, by budget.")
        out += rejected.rendered(name: "feedsync_http_rejected_total")
        family("feedsync_http_request_duration_seconds", "histogram", "From a request's headers to its answer, by route.")
        out += requestDuration.rendered(name: "feedsync_http_request_duration_seconds")
        family("feedsync_worker_queue_length", "gauge", "Requests waiting for a database worker.")
        sample("feedsync_worker_queue_length", queuedJobs.value)
        family("feedsync_workers_busy", "gauge", "Database workers running a request.")
        sample("feedsync_workers_busy", busyWorkers.value)
        family("feedsync_database_wait_seconds", "histogram", "How long a request waited for a database worker.")
        out += workerWait.rendered(name: "feedsync_database_wait_seconds")
        family("feedsync_database_call_seconds", "histogram", "How long a worker's database work took.")
        out += databaseCall.rendered(name: "feedsync_database_call_seconds")
        family("feedsync_last_seq", "gauge", "The last seq the event streams have (the log's head, as this server knows it).")
        sample("feedsync_last_seq", lastSeq.value)
        family("feedsync_stream_log_reads_total", "counter", "Reads of the log by the fan-out, shared by every live stream.")
        sample("feedsync_stream_log_reads_total", logReads.value)
        family("feedsync_stream_catch_up_reads_total", "counter", "Reads of the log by one stream catching up from its cursor.")
        sample("feedsync_stream_catch_up_reads_total", catchUpReads.value)
        family("feedsync_stream_tail_events_total", "counter", "Events the fan-out read and encoded into the shared tail.")
        sample("feedsync_stream_tail_events_total", tailEvents.value)
        family("feedsync_stream_events_total", "counter", "Events written to event streams (one per stream and event).")
        sample("feedsync_stream_events_total", streamEvents.value)
        family("feedsync_stream_bytes_total", "counter", "Bytes written to event streams.")
        sample("feedsync_stream_bytes_total", streamBytes.value)
        family("feedsync_stream_behind_total", "counter", "Streams ended with event: behind (the client fell behind the tail).")
        sample("feedsync_stream_behind_total", streamsBehind.value)
        family(
            "feedsync_stream_delivery_seconds", "histogram",
            "From an event's commit to its first byte handed to a stream's socket, per stream.")
        out += deliveryLatency.rendered(name: "feedsync_stream_delivery_seconds")
        let process = ProcessFigures.read()
        family("process_resident_memory_bytes", "gauge", "Resident memory.")
        sample("process_resident_memory_bytes", process.residentBytes)
        family("process_threads", "gauge", "Threads of the server process.")
        sample("process_threads", process.threads)
        family("process_open_fds", "gauge", "Open file descriptors.")
        sample("process_open_fds", process.openFiles)
        return out
    }
}

/// A value that only grows.
final class Counter: Sendable {
    private let storage = Atomic<Int64>(0)
    func add(_ amount: Int64 = 1) { storage.wrappingAdd(amount, ordering: .relaxed) }
    var value: Int64 { storage.load(ordering: .relaxed) }
}

/// A value that goes up and down.
final class Gauge: Sendable {
    private let storage = Atomic<Int64>(0)
    func add(_ amount: Int64) { storage.wrappingAdd(amount, ordering: .relaxed) }
    func set(_ value: Int64) { storage.store(value, ordering: .relaxed) }
    var value: Int64 { storage.load(ordering: .relaxed) }
}

/// Counters by a fixed list of label names; values come from small fixed sets.
final class LabeledCounter: Sendable {
    private let labels: [String]
    private let counts = Locked<[[String]: Int64]>([:])

    init(labels: [String]) { self.labels = labels }

    func add(_ values: String..., amount: Int64 = 1) {
        counts.withLock { $0[values, default: 0] += amount }
    }

    func rendered(name: String) -> String {
        let snapshot = counts.withLock { $0 }
        return snapshot.keys.sorted { $0.lexicographicallyPrecedes($1) }.map { key in
            let pairs = zip(labels, key).map { "\($0)=\"\($1)\"" }.joined(separator: ",")
            return "\(name){\(pairs)} \(snapshot[key] ?? 0)\n"
        }.joined()
    }
}

/// A cumulative histogram of seconds.
final class Histogram: Sendable {
    struct State {
        var buckets: [Int64]
        var count: Int64 = 0
        var sum: Double = 0
    }
    let bounds: [Double]
    private let state: Locked<State>

    init(bounds: [Double]) {
        self.bounds = bounds
        state = Locked(State(buckets: Array(repeating: 0, count: bounds.count)))
    }

    func observe(_ seconds: Double) {
        let index = bounds.firstIndex { seconds <= $0 }
        state.withLock { state in
            if let index { state.buckets[index] += 1 }
            state.count += 1
            state.sum += seconds
        }
    }

    var snapshot: State { state.withLock { $0 } }

    func rendered(name: String, labels: String = "") -> String {
        let state = snapshot
        let prefix = labels.isEmpty ? "" : labels + ","
        var out = ""
        var cumulative: Int64 = 0
        for (bound, count) in zip(bounds, state.buckets) {
            cumulative += count
            out += "\(name)_bucket{\(prefix)le=\"\(Self.format(bound))\"} \(cumulative)\n"
        }
        out += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(state.count)\n"
        let suffix = labels.isEmpty ? "" : "{\(labels)}"
        out += "\(name)_sum\(suffix) \(Self.format(state.sum))\n"
        out += "\(name)_count\(suffix) \(state.count)\n"
        return out
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

/// Histograms by one label whose values come from a small fixed set.
final class LabeledHistogram: Sendable {
    private let label: String
    private let bounds: [Double]
    private let histograms = Locked<[String: Histogram]>([:])

    init(label: String, bounds: [Double]) {
        self.label = label
        self.bounds = bounds
    }

    func observe(_ value: String, _ seconds: Double) {
        let bounds = bounds
        let histogram = histograms.withLock { all in
            if let existing = all[value] { return existing }
            let made = Histogram(bounds: bounds)
            all[value] = made
            return made
        }
        histogram.observe(seconds)
    }

    func rendered(name: String) -> String {
        let snapshot = histograms.withLock { $0 }
        return snapshot.keys.sorted().map { key in
            snapshot[key]?.rendered(name: name, labels: "\(label)=\"\(key)\"") ?? ""
        }.joined()
    }
}

/// The process's resident memory, threads and open files, from `/proc/self`.
struct ProcessFigures {
    var residentBytes: Int64 = 0
    var threads: Int64 = 0
    var openFiles: Int64 = 0

    static func read() -> ProcessFigures {
        var figures = ProcessFigures()
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) {
            for line in status.split(separator: "\n") {
                let parts = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                guard parts.count >= 2, let value = Int64(parts[1]) else { continue }
                if parts[0] == "VmRSS:" { figures.residentBytes = value * 1024 }
                if parts[0] == "Threads:" { figures.threads = value }
            }
        }
        figures.openFiles = Int64((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0)
        return figures
    }
}
