import FeedCore
@testable import FeedPostgresBackend
import FeedTestSupport
import Foundation
import Testing

/// A connection prepares each distinct statement text once and always runs the statement that text names — whether
/// the text is a constant, built at run time (equal bytes elsewhere in memory), or one of more statements than the
/// connection's short list of recent ones holds.
@Suite struct PreparedStatementTests {
    /// Statement `k` returns `k` plus its parameter, so a result names the statement that ran.
    private static func statement(_ k: Int) -> String {
        "SELECT $1::bigint + " + String(k) + " AS value -- a statement long enough to be stored out of line"
    }

    /// One raw connection to the test database.
    private static func connect(_ db: TestDatabase) throws -> PostgresConnection {
        try PostgresConnection.open(
            url: db.url, applicationName: "feedsync-test-prepared", connectTimeout: .seconds(5), statementTimeout: nil,
            readOnlyByDefault: true)
    }

    @Test func eachTextIsPreparedOnceAndRunsItsOwnStatement() throws {
        guard let db = try TestDatabase.make("prepared_once") else { return }
        let connection = try Self.connect(db)
        defer { connection.close() }
        // 40 distinct texts: more than the recent list holds, so lookups go through both paths.
        let texts = (0..<40).map(Self.statement)
        for round in 0..<3 {
            for (k, text) in texts.enumerated() {
                // The text as stored, then an equal copy built anew (other storage, same bytes).
                let copy = String(decoding: Array(text.utf8), as: UTF8.self)
                // Three runs each: the second and third find the text among the recent statements.
                for sql in [text, text, text, copy, copy, copy] {
                    let result = try connection.execute(sql, [.integer(Int64(round * 1000))], prepared: true)
                    #expect(result.int64(0, 0) == Int64(round * 1000 + k), "statement \(k), round \(round)")
                }
            }
        }
        let prepared = try connection.execute("SELECT count(*) FROM pg_prepared_statements")
        #expect(prepared.int64(0, 0) == 40)
    }

    @Test func fieldsReadTheSameWithoutAskingEachWhetherItIsNull() throws {
        guard let db = try TestDatabase.make("field_nulls") else { return }
        let connection = try Self.connect(db)
        defer { connection.close() }
        let sql = "SELECT NULL::text, ''::text, 'x'::text, NULL::bigint, 0::bigint, -7::bigint, NULL::bool, true, false"
        for binary in [false, true] {
            let result = try connection.execute(sql, prepared: true, binaryResults: binary)
            #expect(result.string(0, 0) == nil)
            #expect(result.string(0, 1) == "")
            #expect(result.string(0, 2) == "x")
            #expect(result.int64(0, 3) == nil)
            #expect(result.int64(0, 4) == 0)
            #expect(result.int64(0, 5) == -7)
            #expect(result.bool(0, 6) == nil)
            #expect(result.bool(0, 7) == true)
            #expect(result.bool(0, 8) == false)
            #expect(result.isNull(0, 0) && !result.isNull(0, 1))
        }
    }
}
