internal import FeedJSON
internal import FeedSync

/// The `--json` shapes only the CLI prints.
extension JSONShapes {
    /// `{"path","backend","server","primary","schemaVersion","binarySchemaVersion","pendingMigrations","users","posts","likes","events",
    /// "lastSeq"}`; `path` is the file, or the URL without its password.
    /// On a replica the keys of ``replicaStatus(_:)`` follow.
    static func status(_ status: StatusReport, replica: ReplicaStatus? = nil) -> JSONValue {
        let count: (Int?) -> JSONValue = { $0.map(JSONValue.number) ?? .null }
        return .object(
            [
                ("path", .string(status.path)), ("backend", .string(status.backend)),
                ("server", status.server.map { .string($0.address) } ?? .null),
                ("primary", status.server.map { .bool($0.isPrimary) } ?? .null),
                ("schemaVersion", .number(status.schemaVersion)),
                ("binarySchemaVersion", .number(status.binarySchemaVersion)),
                ("pendingMigrations", .number(status.pendingMigrations.count)), ("users", count(status.counts?.users)),
                ("posts", count(status.counts?.posts)), ("likes", count(status.counts?.likes)),
                ("events", count(status.counts?.events)), ("lastSeq", status.counts.map { JSONValue.int($0.lastSeq) } ?? .null),
            ] + (replica.map(replicaStatus) ?? []))
    }

    /// `{"pushed","pulled","rejected","pendingChanges","lastSyncedSeq"}`.
    static func syncReport(_ report: ReplicaSync.Report) -> JSONValue {
        .object([
            ("pushed", .number(report.pushed)), ("pulled", .number(report.pulled)), ("rejected", .number(report.rejected)),
            ("pendingChanges", .number(report.pendingChanges)), ("lastSyncedSeq", .int(report.lastSyncedSeq)),
        ])
    }

    /// `{"path","replicaOf","user","clientID","posts","lastSyncedSeq"}`: what `replica init` made; `replicaOf` is the
    /// source without its password.
    static func replicaInit(path: String, status: ReplicaStatus, posts: Int) -> JSONValue {
        .object([
            ("path", .string(path)), ("replicaOf", .string(status.replicaOf)), ("user", .string(status.user)),
            ("clientID", .string(status.clientID)), ("posts", .number(posts)), ("lastSyncedSeq", .int(status.lastSyncedSeq)),
        ])
    }

    /// The keys `status` adds on a replica: `"replicaOf","user","pendingChanges","rejectedChanges","lastSyncedSeq",
    /// "lastSyncAt","lastError"`.
    static func replicaStatus(_ status: ReplicaStatus) -> [(String, JSONValue)] {
        [
            ("replicaOf", .string(status.replicaOf)), ("user", .string(status.user)),
            ("pendingChanges", .number(status.pendingChanges)), ("rejectedChanges", .number(status.rejectedChanges)),
            ("lastSyncedSeq", .int(status.lastSyncedSeq)), ("lastSyncAt", status.lastSyncAt.map(JSONValue.time) ?? .null),
            ("lastError", .optional(status.lastError)),
        ]
    }
}
