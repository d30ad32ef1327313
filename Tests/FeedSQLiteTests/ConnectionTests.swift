import FeedSQLite
import FeedTestSupport
import Foundation
import Testing

@Suite struct ConnectionTests {
    @Test func typedBindingsRoundTrip() throws {
        let db = try Connection(location: .inMemory)
        try db.execute("CREATE TABLE t (i INTEGER, r REAL, s TEXT, b BLOB, n)")
        let blob = Data([0, 1, 2, 255])
        try db.run("INSERT INTO t VALUES (?, ?, ?, ?, ?)", Int64.max, 2.5, "héllo 👋", blob, String?.none)
        let row = try #require(
            try db.fetchOne("SELECT i, r, s, b, n, typeof(n), typeof(b) FROM t") { row in
                (
                    row.int64(at: 0), row.double(at: 1), row.string(at: 2), row.data(at: 3), row.isNull(at: 4), row.string(at: 5),
                    row.string(at: 6)
                )
            })
        #expect(row.0 == Int64.max)
        #expect(row.1 == 2.5)
        #expect(row.2 == "héllo 👋")
        #expect(row.3 == blob)
        #expect(row.4)
        #expect(row.5 == "null")
        #expect(row.6 == "blob")
    }

    @Test func emptyBlobStaysABlobNotNull() throws {
        let db = try Connection(location: .inMemory)
        #expect(try db.fetchOne("SELECT typeof(?)", Data(), decode: { $0.string(at: 0) }) == "blob")
    }

    @Test func cachedStatementIsReusedAndBindingsAreClearedAfterUse() throws {
        let db = try Connection(location: .inMemory)
        let first = try db.cachedStatement("SELECT ?")
        #expect(try first.fetchOne(42, decode: { $0.int64(at: 0) }) == 42)
        let again = try db.cachedStatement("SELECT ?")
        #expect(first === again)
        // The binding of the previous run does not survive it: stepping without binding reads NULL.
        #expect(try again.step())
        #expect(again.row.isNull(at: 0))
        again.reset()
    }

    /// More distinct texts than the connection's short list of recent statements, each looked up as stored and as
    /// an equal copy built anew: every lookup returns the one statement of its text, which runs that text.
    @Test func eachTextHasOneCachedStatementHoweverItIsStored() throws {
        let db = try Connection(location: .inMemory)
        let texts = (0..<20).map { k in "SELECT ? + " + String(k) + " -- long enough to be stored out of line" }
        var statements: [Int: Statement] = [:]
        for round in 0..<3 {
            for (k, text) in texts.enumerated() {
                let copy = String(decoding: Array(text.utf8), as: UTF8.self)
                for sql in [text, text, copy, copy, text] {
                    let statement = try db.cachedStatement(sql)
                    if let first = statements[k] { #expect(statement === first, "statement \(k)") } else { statements[k] = statement }
                    #expect(try statement.fetchOne(Int64(round * 100), decode: { $0.int64(at: 0) }) == Int64(round * 100 + k))
                }
            }
        }
    }

    @Test func errorsCarryCodesMessageAndSQLButNotBoundValues() throws {
        let db = try Connection(location: .inMemory)
        try db.execute("CREATE TABLE t (id TEXT PRIMARY KEY)")
        try db.run("INSERT INTO t VALUES (?)", "secret-value")
        let error = try #require(throws: SQLiteError.self) {
            try db.run("INSERT INTO t VALUES (?)", "secret-value")
        }
        #expect(error.code == .constraintPrimaryKey)
        #expect(error.primaryCode == .constraint)
        #expect(ResultCode.constraint ~= error.code)
        #expect(error.sql == "INSERT INTO t VALUES (?)")
        #expect(error.message.contains("UNIQUE constraint failed"))
        #expect(!error.description.contains("secret-value"))
        #expect(error.description.contains("INSERT INTO t VALUES (?)"))
    }

    @Test func syntaxErrorIsTypedWithSQL() throws {
        let db = try Connection(location: .inMemory)
        let error = try #require(throws: SQLiteError.self) { try db.makeStatement("SELEC 1") }
        #expect(error.code == .error)
        #expect(error.sql == "SELEC 1")
    }

    @Test func preparingTwoStatementsAtOnceIsRefused() throws {
        let db = try Connection(location: .inMemory)
        let error = try #require(throws: SQLiteError.self) { try db.makeStatement("SELECT 1; SELECT 2") }
        #expect(error.code == .misuse)
    }

    @Test func throwingTransactionLeavesNothingBehind() throws {
        let db = try Connection(location: .inMemory)
        try db.execute("CREATE TABLE t (x INTEGER)")
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try db.transaction { db in
                try db.run("INSERT INTO t VALUES (1)")
                throw Boom()
            }
        }
        #expect(try db.fetchInt64("SELECT count(*) FROM t") == 0)
        #expect(!db.isInTransaction)
    }

    @Test func savepointRollsBackOnlyItsOwnWork() throws {
        let db = try Connection(location: .inMemory)
        try db.execute("CREATE TABLE t (x INTEGER)")
        struct Boom: Error {}
        try db.transaction { db in
            try db.run("INSERT INTO t VALUES (1)")
            _ = try? db.savepoint { db in
                try db.run("INSERT INTO t VALUES (2)")
                throw Boom()
            }
            _ = try db.savepoint { db in try db.run("INSERT INTO t VALUES (3)") }
        }
        #expect(try db.fetchAll("SELECT x FROM t ORDER BY x", decode: { $0.int64(at: 0) }) == [1, 3])
    }

    @Test func fileConnectionUsesWALNormalSyncAndForeignKeys() throws {
        let dir = TemporaryDirectory()
        let db = try Connection(location: .file(dir.file("a.sqlite")))
        #expect(try db.fetchOne("PRAGMA journal_mode", decode: { $0.string(at: 0) }) == "wal")
        #expect(try db.fetchInt64("PRAGMA synchronous") == 1)
        #expect(try db.fetchInt64("PRAGMA foreign_keys") == 1)
    }

    @Test func newDatabaseFileIsOwnerOnly() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("private.sqlite")
        _ = try Connection(location: .file(path))
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        let permissions = try #require(attributes[.posixPermissions] as? Int)
        #expect(permissions & 0o077 == 0)
    }

    @Test func fileThatIsNotADatabaseGivesTypedErrorAndStaysUnmodified() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("notes.txt")
        let content = Data(String(repeating: "this is not a database\n", count: 200).utf8)
        try content.write(to: URL(fileURLWithPath: path))
        let error = try #require(throws: SQLiteError.self) { try Connection(location: .file(path)) }
        #expect(error.code == .notADatabase)
        #expect(fileBytes(path) == content)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }

    @Test func missingDirectoryCannotOpen() throws {
        let dir = TemporaryDirectory()
        let error = try #require(throws: SQLiteError.self) { try Connection(location: .file(dir.file("missing/db.sqlite"))) }
        #expect(error.code.primary == .cannotOpen)
    }

    @Test func readOnlyConnectionRefusesWrites() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("ro.sqlite")
        do {
            let writer = try Connection(location: .file(path))
            try writer.execute("CREATE TABLE t (x)")
        }
        let reader = try Connection(location: .file(path), readOnly: true)
        let error = try #require(throws: SQLiteError.self) { try reader.run("INSERT INTO t VALUES (1)") }
        #expect(error.code.primary == .readOnly)
    }

    @Test func queryPlanIsReported() throws {
        let db = try Connection(location: .inMemory)
        try db.execute("CREATE TABLE t (a INTEGER, b INTEGER); CREATE INDEX t_a ON t (a);")
        let plan = try db.makeStatement("SELECT b FROM t WHERE a = ?").queryPlan()
        #expect(plan.contains { $0.contains("USING INDEX t_a") })
    }
}
