import FeedCore
@testable import FeedPostgresBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

// Blocks: waits for statements that run into their timeout (`pg_sleep`).
@Suite(.ownThreads) struct ErrorMappingTests {
    @Test func aDuplicateUserIsUserAlreadyExistsAndTheTransactionGoesOn() throws {
        guard let db = try TestDatabase.make("errors_user") else { return }
        try seedUsersAndPost(db.backend)
        try write(db.backend) { tx throws in
            #expect(throws: StorageError.userAlreadyExists("u1")) { try tx.insertUser(id: "u1", name: "again", at: testTime) }
            // Unlike a failed statement, the refusal did not abort the transaction.
            _ = try tx.insertUser(id: "u3", name: "", at: testTime)
        }
        #expect(try db.backend.readOnce { tx in try tx.allUsers().map(\.id) } == ["u1", "u2", "u3"])
    }

    @Test func postRefusalsNameTheOffendingId() throws {
        guard let db = try TestDatabase.make("errors_post") else { return }
        try seedUsersAndPost(db.backend)
        try write(db.backend) { tx throws in
            #expect(throws: StorageError.postAlreadyExists("p1")) { try tx.insertPost(id: "p1", authorID: "u2", body: "x", at: testTime) }
            #expect(throws: StorageError.userNotFound("ghost")) { try tx.insertPost(id: "p2", authorID: "ghost", body: "x", at: testTime) }
            // Both wrong: the duplicate id wins, as on SQLite (its UNIQUE check fails before the foreign key).
            #expect(throws: StorageError.postAlreadyExists("p1")) {
                try tx.insertPost(id: "p1", authorID: "ghost", body: "x", at: testTime)
            }
            _ = try tx.insertPost(id: "p3", authorID: "u2", body: "still writable", at: testTime)
        }
        #expect(try db.backend.readOnce { tx in try tx.post(id: "p3")?.body } == "still writable")
        #expect(try db.backend.readOnce { tx in try tx.maintenance.counts() } == FeedCounts(users: 2, posts: 2, likes: 0, events: 0))
    }

    @Test func invalidValuesAreRefusedBeforeTheServerSeesThem() throws {
        guard let db = try TestDatabase.make("errors_validation") else { return }
        try write(db.backend) { tx throws in
            #expect(throws: StorageError.constraintViolation(field: "user id", reason: "use only letters, digits and _ . : @ -")) {
                try tx.insertUser(id: "bad id", name: "", at: testTime)
            }
            #expect(throws: StorageError.constraintViolation(field: "post text", reason: "it is empty")) {
                try tx.insertPost(id: "p1", authorID: "u1", body: "", at: testTime)
            }
            #expect(throws: StorageError.constraintViolation(field: "user name", reason: "it contains a NUL character")) {
                try tx.insertUser(id: "u1", name: "a\0b", at: testTime)
            }
            #expect(throws: StorageError.constraintViolation(field: "subscriber name", reason: "use 1 to 128 characters")) {
                try tx.advanceSubscriberCursor(1, for: "", at: testTime)
            }
        }
    }

    @Test func checkViolationsAndOverlongValuesAreConstraintViolations() throws {
        guard let db = try TestDatabase.make("errors_check") else { return }
        try write(db.backend) { tx throws in
            let check = try #require(throws: StorageError.self) {
                try tx.savepoint {
                    try tx.userStatements.execute("INSERT INTO users (id, name, created_at) VALUES ($1, repeat('a', 300), 0)", ["u1"])
                }
            }
            guard case .constraintViolation(let field, _) = check else {
                Issue.record("unexpected \(check)")
                return
            }
            #expect(field == "user name")
            try tx.userStatements.execute("CREATE TEMPORARY TABLE short_values (v varchar(3))")
            let tooLong = try #require(throws: StorageError.self) {
                try tx.savepoint { try tx.userStatements.execute("INSERT INTO short_values (v) VALUES ($1)", ["abcdef"]) }
            }
            guard case .constraintViolation = tooLong else {
                Issue.record("unexpected \(tooLong)")
                return
            }
        }
    }

    @Test func aStatementBeyondTheTimeoutIsTimedOut() throws {
        guard let db = try TestDatabase.make("errors_timeout") else { return }
        let started = ContinuousClock.now
        let error = try #require(throws: StorageError.self) {
            try write(db.backend) { tx throws in
                try tx.userStatements.execute("SET LOCAL statement_timeout = 100")
                _ = try tx.userStatements.fetch("SELECT pg_sleep(10)", [])
            }
        }
        guard case .timedOut(let failure) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(failure.code == "57014")
        #expect(failure.backend == "PostgreSQL")
        #expect(ContinuousClock.now - started < .seconds(5))
        // The connection went back to the pool in a usable state.
        #expect(try db.backend.readOnce { tx in try tx.lastSeq() } == 0)
    }

    @Test func theConfiguredStatementTimeoutApplies() throws {
        guard let database = try PostgresTestDatabase.make("errors_timeout_option") else { return }
        defer { database.drop() }
        let backend = try PostgresBackend(url: database.url, options: PostgresOptions(statementTimeout: .milliseconds(200)))
        defer { backend.close() }
        let error = try #require(throws: StorageError.self) {
            try backend.readOnce { tx in try tx.userStatements.fetch("SELECT pg_sleep(10)", []) }
        }
        guard case .timedOut = error else {
            Issue.record("unexpected \(error)")
            return
        }
    }

    @Test func writingInAReadIsReadOnly() throws {
        guard let db = try TestDatabase.make("errors_readonly") else { return }
        try seedUsersAndPost(db.backend)
        let location = db.backend.location
        try db.backend.read { tx throws in
            #expect(throws: StorageError.readOnly(path: location)) { try tx.insertUser(id: "u9", name: "", at: testTime) }
            #expect(throws: StorageError.readOnly(path: location)) {
                try tx.appendEvent(kind: .userCreated, userID: "u9", postID: nil, likeCount: nil, at: testTime)
            }
            #expect(throws: StorageError.readOnly(path: location)) { try tx.userStatements.execute("DELETE FROM likes") }
        }
        try db.backend.readOnce { tx throws in
            #expect(throws: StorageError.readOnly(path: location)) { try tx.pg.insertLike(userKey: 1, postKey: 1, at: testTime) }
            // Your own statements are refused outside write transactions too.
            #expect(throws: StorageError.readOnly(path: location)) { try tx.userStatements.execute("DELETE FROM users") }
        }
        #expect(try db.backend.readOnce { tx in try tx.maintenance.counts().users } == 2)
    }

    @Test func insufficientPrivilegeIsReadOnly() throws {
        guard let db = try TestDatabase.make("errors_privilege") else { return }
        let location = db.backend.location
        // Either SET ROLE is refused (not a member) or the role may not read the table: 42501 both ways.
        #expect(throws: StorageError.readOnly(path: location)) {
            try write(db.backend) { tx throws in
                try tx.userStatements.execute("SET LOCAL ROLE pg_monitor")
                try tx.userStatements.execute("DELETE FROM users")
            }
        }
    }

    @Test func otherFailuresCarryTheCodeTheMessageAndTheStatementButNoValue() throws {
        guard let db = try TestDatabase.make("errors_other") else { return }
        let missing = try #require(throws: StorageError.self) {
            try db.backend.readOnce { tx in try tx.userStatements.fetch("SELECT * FROM no_such_table", []) }
        }
        #expect(
            missing
                == .database(
                    DatabaseFailure(
                        backend: "PostgreSQL", code: "42P01", message: "relation \"no_such_table\" does not exist",
                        sql: "SELECT * FROM no_such_table")))
        let secret = "secret-value-4711"
        let syntax = try #require(throws: StorageError.self) {
            try db.backend.readOnce { tx in try tx.userStatements.fetch("SELECT $1::bigint", [.text(secret)]) }
        }
        guard case .database(let failure) = syntax else {
            Issue.record("unexpected \(syntax)")
            return
        }
        #expect(failure.code == "22P02")
        #expect(!syntax.description.contains(secret))
        #expect(!String(reflecting: syntax).contains(secret))
    }

    @Test func theEventLogRefusesUpdates() throws {
        guard let db = try TestDatabase.make("errors_append_only") else { return }
        try write(db.backend) { tx in _ = try tx.appendEvent(kind: .userCreated, userID: "u1", postID: nil, likeCount: nil, at: testTime) }
        let error = try #require(throws: StorageError.self) {
            try write(db.backend) { tx in try tx.userStatements.execute("UPDATE events SET at = 0") }
        }
        guard case .database(let failure) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(failure.message.contains("append-only"))
    }

    @Test func aBodyThatSwallowsAFailureCannotCommit() throws {
        guard let db = try TestDatabase.make("errors_swallowed") else { return }
        let error = try #require(throws: StorageError.self) {
            try write(db.backend) { tx throws in
                _ = try tx.insertUser(id: "u1", name: "", at: testTime)
                _ = try? tx.userStatements.fetch("SELECT * FROM no_such_table", [])
            }
        }
        guard case .database(let failure) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(failure.code == "42P01")
        #expect(try db.backend.readOnce { tx in try tx.maintenance.counts().users } == 0)
    }

    @Test func aTextValueWithNULIsRefusedWithoutAbortingTheTransaction() throws {
        guard let db = try TestDatabase.make("errors_nul") else { return }
        try write(db.backend) { tx throws in
            let error = try #require(throws: StorageError.self) {
                try tx.userStatements.execute(
                    "INSERT INTO subscriber_cursors (name, last_seq, updated_at) VALUES ($1, 0, 0)", [.text("a\0b")])
            }
            guard case .database(let failure) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(failure.code == "22021")
            _ = try tx.insertUser(id: "u1", name: "", at: testTime)
        }
        #expect(try db.backend.readOnce { tx in try tx.maintenance.counts().users } == 1)
    }

    @Test func aNestedWriteOnTheSameThreadFailsClearly() throws {
        guard let db = try TestDatabase.make("errors_nested") else { return }
        #expect(!db.backend.isWritingOnCurrentThread)
        let insideAfterCommit = Shared(false)
        try db.backend.write(
            { _ in
                #expect(db.backend.isWritingOnCurrentThread)
                let error = try #require(throws: StorageError.self) { try write(db.backend) { _ in } }
                guard case .database(let failure) = error else {
                    Issue.record("unexpected \(error)")
                    return
                }
                #expect(failure.message.contains("a write from inside a write"))
            },
            afterCommit: { _ in insideAfterCommit.update { $0 = db.backend.isWritingOnCurrentThread } })
        #expect(insideAfterCommit.current)
        #expect(!db.backend.isWritingOnCurrentThread)
    }

    @Test func aURLThatIsNotPostgreSQLIsRefusedWithoutShowingIt() throws {
        let error = try #require(throws: StorageError.self) { try PostgresBackend(url: "host=db password=hunter2") }
        guard case .cannotOpen(let path, _) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(!path.contains("hunter2"))
        #expect(!error.description.contains("hunter2"))
    }

    @Test func anUnreachableServerIsConnectionLostWithoutThePassword() throws {
        let url = "postgresql://someone:hunter2@127.0.0.1:1/feed?connect_timeout=2"
        let error = try #require(throws: StorageError.self) { try PostgresBackend(url: url) }
        guard case .connectionLost(let location, _) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(location == "postgresql://someone@127.0.0.1:1/feed?connect_timeout=2")
        #expect(!error.description.contains("hunter2"))
    }
}
