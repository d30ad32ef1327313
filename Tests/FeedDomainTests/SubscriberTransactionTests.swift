import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import Foundation
import Testing

/// The handle a transactional durable subscriber's handler gets behaves the same on both backends: `$n` placeholders,
/// bound values, reads of its own rows, and a failed statement failing the whole pass even when the handler catches it.
@Suite struct SubscriberTransactionTests {
    @Test(arguments: TestBackend.allCases)
    func aFailedStatementFailsThePassEvenWhenTheHandlerCatchesIt(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try service.executeSQL("CREATE TABLE seen (seq BIGINT PRIMARY KEY, kind TEXT NOT NULL)")
        try service.createUser(id: "u1")
        try service.createPost(id: "p1", authorID: "u1", body: "hello")
        let total = try service.events(after: 0).count
        // A row for seq 2 is there already: the handler's insert for it fails on the primary key.
        try service.executeSQL("INSERT INTO seen (seq, kind) VALUES (2, 'planted')")
        let caught = LockedLog<Int64>()
        let subscriber = DurableSubscriber(
            name: "seen", service: service,
            delivery: .transactional { event, db in
                do {
                    try db.execute("INSERT INTO seen (seq, kind) VALUES ($1, $2)", [.integer(event.seq), .text(event.kind.rawValue)])
                } catch {
                    caught.append(event.seq)  // swallowed: the pass must fail anyway
                }
            })
        #expect(throws: FeedError.self) { try subscriber.catchUp() }
        #expect(caught.values == [2])
        #expect(try subscriber.cursor() == 0, "the cursor did not move")
        #expect(try service.firstColumn("SELECT seq FROM seen ORDER BY seq") == [.integer(2)], "seq 1's row was rolled back")

        try service.executeSQL("DELETE FROM seen")
        #expect(try subscriber.catchUp() == total)
        #expect(try subscriber.cursor() == Int64(total))
        #expect(try service.firstColumn("SELECT seq FROM seen ORDER BY seq") == (1...Int64(total)).map { .integer($0) })
    }

    @Test(arguments: TestBackend.allCases)
    func handlersReadTheirOwnRowsWithBoundValuesInTheSameTransaction(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try service.executeSQL("CREATE TABLE like_totals (user_id TEXT PRIMARY KEY, total BIGINT NOT NULL, note TEXT)")
        try service.createUser(id: "u1")
        try service.createUser(id: "u2")
        try service.createPost(id: "p1", authorID: "u1", body: "hello")
        try service.createPost(id: "p2", authorID: "u1", body: "world")
        let subscriber = DurableSubscriber(
            name: "totals", service: service, batchSize: 2,
            delivery: .transactional { event, db in
                guard event.kind == .liked || event.kind == .unliked else { return }
                let rows = try db.fetch("SELECT total FROM like_totals WHERE user_id = $1", [.text(event.userID)])
                let total = (rows.first?.first?.integer ?? 0) + (event.kind == .liked ? 1 : -1)
                if rows.isEmpty {
                    try db.execute(
                        "INSERT INTO like_totals (user_id, total, note) VALUES ($1, $2, $3)",
                        [.text(event.userID), .integer(total), .text("it's; DROP TABLE like_totals; --")])
                } else {
                    try db.execute("UPDATE like_totals SET total = $2 WHERE user_id = $1", [.text(event.userID), .integer(total)])
                }
            })
        try service.like(userID: "u2", postID: "p1")
        try service.like(userID: "u2", postID: "p2")
        try service.like(userID: "u1", postID: "p1")
        try service.unlike(userID: "u2", postID: "p1")
        #expect(try subscriber.catchUp() == service.events(after: 0).count)
        #expect(
            try service.firstColumn("SELECT user_id || '=' || CAST(total AS TEXT) || '/' || note FROM like_totals ORDER BY user_id")
                == [.text("u1=1/it's; DROP TABLE like_totals; --"), .text("u2=1/it's; DROP TABLE like_totals; --")])
    }
}
