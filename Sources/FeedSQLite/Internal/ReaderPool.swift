internal import Foundation

/// Reader connections opened on demand, up to `capacity`, handed out one per closure.
///
/// **The memory map follows the writes** (``MapPolicy``). A reader maps the file (``Configuration/memoryMapSizeMiB``)
/// while the database stays still between its uses, and reads with `pread` while it keeps changing: SQLite drops a
/// connection's page cache and unmaps the whole file whenever a read transaction finds a commit it has not seen, so
/// under steady writes every use would map the file again and fault its pages back in. Measured on `feedsync serve`
/// (W9, 16 clients toggling): readers that keep the map cost the server about a tenth more CPU.
///
/// `@unchecked Sendable`: `idle` and `isClosed` are only touched while `lock` is held; a connection taken out of
/// `idle` (with its ``MapPolicy``) is used by exactly one thread until it is put back; `slots` bounds how many are
/// out.
final class ReaderPool: @unchecked Sendable {
    let capacity: Int
    private let location: Connection.Location
    private let configuration: Configuration
    /// How each reader opens the file: ``Connection/Access/readOnly`` or ``Connection/Access/immutable``.
    private let access: Connection.Access
    private let lock = NSLock()
    private let slots: DispatchSemaphore
    private var idle: [(connection: Connection, map: MapPolicy)] = []
    private var isClosed = false

    init(location: Connection.Location, configuration: Configuration, capacity: Int, access: Connection.Access = .readOnly) {
        self.location = location
        self.configuration = configuration
        self.access = access
        self.capacity = capacity
        self.slots = DispatchSemaphore(value: capacity)
    }

    func withReader<T, E: Error>(_ body: (Connection) throws(E) -> T) throws -> T {
        precondition(capacity > 0, "API Violation: an in-memory database has no reader connections")
        slots.wait()
        defer { slots.signal() }
        var (connection, map) = try checkOut()
        connection.isAccessible = true
        defer {
            map.used(connection)
            connection.isAccessible = false
            checkIn(connection, map)
        }
        return try body(connection)
    }

    private func checkOut() throws(SQLiteError) -> (Connection, MapPolicy) {
        let reused = lock.withLock {
            isClosed ? nil : idle.popLast()
        }
        if let reused { return reused }
        if lock.withLock({ isClosed }) { throw SQLiteError(code: .misuse, message: "the database is closed") }
        let connection = try Connection(location: location, access: access, configuration: configuration)
        connection.isAccessible = false
        return (connection, MapPolicy(megabytes: configuration.memoryMapSizeMiB ?? 0))
    }

    private func checkIn(_ connection: Connection, _ map: MapPolicy) {
        let keep = lock.withLock { () -> Bool in
            guard !isClosed else { return false }
            idle.append((connection, map))
            return true
        }
        if !keep { connection.close() }
    }

    func close() {
        let connections = lock.withLock { () -> [(connection: Connection, map: MapPolicy)] in
            isClosed = true
            defer { idle.removeAll() }
            return idle
        }
        for (connection, _) in connections {
            connection.isAccessible = true
            connection.close()
        }
    }
}

/// Whether one reader maps the file: it stops once ``stopAfter`` of its last 8 uses found the database changed, and
/// maps again once its last ``resumeAfter`` uses all found it still. A use found it changed when the connection's
/// ``Connection/pagerDataVersion`` moved: SQLite then dropped the page cache and the map. (A share, not a run: a
/// request often reads twice, a token and then its data, and only the first read sees the commits since the last.)
struct MapPolicy {
    static let stopAfter = 4
    static let resumeAfter = 64
    /// The configured map, in MiB; 0 when the configuration maps nothing.
    let megabytes: Int
    private(set) var isMapping: Bool
    private var lastVersion: UInt32?
    /// The uses since the last switch, newest in bit 0: 1 for a use that found a change.
    private var history: UInt64 = 0
    private var uses = 0

    init(megabytes: Int) {
        self.megabytes = megabytes
        isMapping = megabytes > 0
    }

    /// Counts the use that just ended on `connection` (accessible, outside a transaction), and switches its map when
    /// the uses call for it. A failed switch leaves the map as it was: it changes speed, never results.
    mutating func used(_ connection: Connection) {
        guard megabytes > 0 else { return }
        var version = connection.pagerDataVersion
        defer { lastVersion = version }
        // A new connection's first use always reads the file: it says nothing about writes.
        guard let lastVersion else { return }
        history = history << 1 | (version != lastVersion ? 1 : 0)
        uses += 1
        let switches =
            isMapping ? (history & 0xFF).nonzeroBitCount >= Self.stopAfter : uses >= Self.resumeAfter && history == 0
        guard switches, (try? connection.mapFile(megabytes: isMapping ? 0 : megabytes)) != nil else { return }
        isMapping.toggle()
        history = 0
        uses = 0
        // The pragma's own statement may have seen a commit too: the next use compares with what follows it.
        version = connection.pagerDataVersion
    }
}
