import FeedCore
import FeedDomain
import FeedSQLite
import FeedSync
import FeedTestSupport
import Foundation
import Testing

/// The seam's like operation, ``FeedTransaction/applyLikes(_:)``: the same units give the same outcomes, rows and
/// events on both backends (SQLite statement by statement, PostgreSQL in one statement).
@Suite struct ApplyLikesTests {
    @Test(arguments: TestBackend.allCases)
    func eachUnitCommitsOrFailsAloneAndTheEventsTakeConsecutiveSeqsInOrder(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        let db = try seed(service)
        let before = try db.readOnce { tx in try tx.lastSeq() }
        let units = [
            // A: like p1, toggle p1 twice (like → unlike → like again would be three; two toggles of u2 on p2).
            LikeUnit(
                operations: [
                    LikeCommand(.like, userID: "u2", postID: "p1"), LikeCommand(.like, userID: "u2", postID: "p1"),
                    LikeCommand(.toggle, userID: "u2", postID: "p2"), LikeCommand(.toggle, userID: "u2", postID: "p2"),
                ], at: testTime),
            // B: a like that would stick, then an unknown post: all of B is undone.
            LikeUnit(
                operations: [LikeCommand(.like, userID: "u3", postID: "p2"), LikeCommand(.like, userID: "u3", postID: "nope")],
                at: testTime),
            // C: an unknown user.
            LikeUnit(operations: [LikeCommand(.unlike, userID: "ghost", postID: "p1")], at: testTime),
            // D: unlike what is not liked (no change), then a toggle of p1 by u3.
            LikeUnit(
                operations: [LikeCommand(.unlike, userID: "u3", postID: "p1"), LikeCommand(.toggle, userID: "u3", postID: "p1")],
                at: testTime),
        ]
        let outcomes = try db.write({ tx in try tx.applyLikes(units) }, afterCommit: { _ in })
        #expect(outcomes.count == 4)
        let a = try outcomes[0].get()
        #expect(a.map(\.liked) == [true, true, true, false])
        #expect(a.map(\.likeCount) == [1, 1, 1, 0])
        #expect(a.map { $0.event?.seq } == [before + 1, nil, before + 2, before + 3])
        #expect(a.compactMap { $0.event?.kind } == [.liked, .liked, .unliked])
        #expect(throws: StorageError.postNotFound("nope")) { try outcomes[1].get() }
        #expect(throws: StorageError.userNotFound("ghost")) { try outcomes[2].get() }
        let d = try outcomes[3].get()
        #expect(d.map(\.liked) == [false, true])
        #expect(d.map(\.likeCount) == [1, 2])
        #expect(d.map { $0.event?.seq } == [nil, before + 4])

        try db.read { tx throws in
            #expect(try tx.allLikes() == [LikePair(userID: "u2", postID: "p1"), LikePair(userID: "u3", postID: "p1")])
            #expect(try tx.post(id: "p1")?.likeCount == 2)
            #expect(try tx.post(id: "p2")?.likeCount == 0, "B's like of p2 was undone with B")
            let events = try tx.events(after: before, limit: nil)
            #expect(events.map(\.seq) == Array((before + 1)...(before + 4)))
            #expect(events == a.compactMap(\.event) + d.compactMap(\.event))
            #expect(try tx.maintenance.invariantViolations().isEmpty)
        }
    }

    /// A command sent alone answers, writes and logs exactly what the same command does beside another in a batch
    /// (on PostgreSQL a batch of several locks its rows first): the same sequence of likes, unlikes and toggles, sent
    /// alone to one database and each with a companion that changes nothing to another, gives the same outcomes, rows
    /// and events.
    @Test(arguments: TestBackend.allCases)
    func aLoneCommandDoesWhatTheSameCommandDoesInABatch(on backend: TestBackend) throws {
        let (aloneDir, batchDir) = (TemporaryDirectory(), TemporaryDirectory())
        guard let alone = try makeService(in: aloneDir, on: backend), let batched = try makeService(in: batchDir, on: backend)
        else { return }
        defer {
            alone.close()
            batched.close()
        }
        let (aloneDB, batchDB) = (try seed(alone), try seed(batched))
        let commands: [LikeCommand] = [
            LikeCommand(.like, userID: "u2", postID: "p1"), LikeCommand(.like, userID: "u2", postID: "p1"),
            LikeCommand(.toggle, userID: "u2", postID: "p1"), LikeCommand(.toggle, userID: "u2", postID: "p1"),
            LikeCommand(.unlike, userID: "u2", postID: "p1"), LikeCommand(.unlike, userID: "u2", postID: "p1"),
            LikeCommand(.toggle, userID: "u3", postID: "p2"), LikeCommand(.like, userID: "u3", postID: "p1"),
            LikeCommand(.toggle, userID: "u3", postID: "p1"),
        ]
        let companion = LikeCommand(.unlike, userID: "u1", postID: "p2")
        var aloneOutcomes: [LikeOutcome] = []
        var batchOutcomes: [LikeOutcome] = []
        for command in commands {
            let one = try aloneDB.write({ tx in try tx.applyLikes([LikeUnit(operations: [command], at: testTime)]) }, afterCommit: { _ in })
            aloneOutcomes += try one[0].get()
            let two = try batchDB.write(
                { tx in try tx.applyLikes([LikeUnit(operations: [companion, command], at: testTime)]) }, afterCommit: { _ in })
            let both = try two[0].get()
            #expect(both.first?.event == nil && both.first?.liked == false, "the companion changes nothing")
            batchOutcomes += both.dropFirst()
        }
        #expect(aloneOutcomes == batchOutcomes)
        #expect(aloneOutcomes.map(\.liked) == [true, true, false, true, false, false, true, true, false])
        let state = { (db: any FeedBackend) in
            try db.readOnce { tx in
                (try tx.allLikes(), try tx.events(after: 0, limit: nil), try tx.post(id: "p1")?.likeCount, try tx.post(id: "p2")?.likeCount)
            }
        }
        let (aloneState, batchState) = (try state(aloneDB), try state(batchDB))
        #expect(aloneState.0 == batchState.0 && aloneState.1 == batchState.1)
        #expect(aloneState.2 == batchState.2 && aloneState.3 == batchState.3)
        try aloneDB.read { tx throws in #expect(try tx.maintenance.invariantViolations().isEmpty) }
    }

    /// A call's only unit that names an unknown id fails with the typed error — as its result (SQLite) or thrown,
    /// failing the transaction (PostgreSQL: the statement failed) — and leaves nothing written.
    @Test(arguments: TestBackend.allCases) func aLoneUnitsFailureIsTheTypedErrorWithNothingWritten(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        let db = try seed(service)
        let before = try db.readOnce { tx in try tx.lastSeq() }
        let ghost = LikeUnit(operations: [LikeCommand(.toggle, userID: "ghost", postID: "p1")], at: testTime)
        let nope = LikeUnit(
            operations: [LikeCommand(.like, userID: "u2", postID: "p1"), LikeCommand(.like, userID: "u2", postID: "nope")],
            at: testTime)
        for (unit, expected) in [(ghost, StorageError.userNotFound("ghost")), (nope, .postNotFound("nope"))] {
            #expect(throws: expected) {
                try db.write({ tx in try tx.applyLikes([unit])[0].get() }, afterCommit: { _ in })
            }
        }
        try db.read { tx throws in
            #expect(try tx.allLikes().isEmpty)
            #expect(try tx.lastSeq() == before)
        }
    }

    /// On SQLite a like writes three B-tree pages — its row, its post's count and its event — so the commit appends
    /// three frames to the write-ahead log and no more (likes are indexed by their primary key only).
    @Test func aSQLiteLikeCommitsThreePagesTheRowTheCountAndTheEvent() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("pages.sqlite")
        let service = try FeedService(location: path)
        defer { service.close() }
        _ = try seed(service)
        _ = try service.like(userID: "u1", postID: "p1")
        let outside = try Connection(location: .file(path))
        defer { outside.close() }
        let pageSize = try #require(try outside.fetchInt64("PRAGMA page_size"))
        try outside.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        #expect(try walBytes(path) == 0)

        let result = try service.like(userID: "u2", postID: "p2")
        #expect(result.likeCount == 1)
        let bytes = try walBytes(path)
        let header: Int64 = 32, frameHeader: Int64 = 24
        #expect((bytes - header) % (frameHeader + pageSize) == 0, "\(bytes) bytes")
        #expect((bytes - header) / (frameHeader + pageSize) == 3, "\(bytes) bytes")
    }

    private func walBytes(_ path: String) throws -> Int64 {
        try (FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? NSNumber)?.int64Value ?? -1
    }

    /// Users u1…u3 and posts p1, p2 by u1; the service's backend.
    private func seed(_ service: FeedService) throws -> any FeedBackend {
        for index in 1...3 { try service.createUser(id: "u\(index)") }
        try service.createPost(id: "p1", authorID: "u1", body: "hello")
        try service.createPost(id: "p2", authorID: "u1", body: "second")
        return service.backend
    }
}

/// The fixed time of the units' likes and events.
private let testTime = Date(timeIntervalSince1970: 1_700_000_000.123)
