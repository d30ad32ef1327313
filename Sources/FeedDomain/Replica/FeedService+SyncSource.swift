internal import FeedCore
internal import FeedDependencies
internal import Foundation

/// The source's side of the replica protocol: applying pushes exactly once and answering pulls.
///
/// A push runs in write transactions of the service (each a run of likes or a run of new posts, in number order);
/// each records the client's highest applied number, and the log's last seq at that commit, in `sync_clients` in
/// the same transaction as the change — so a number is applied at most once, whatever happens to the answer. A pull
/// is one read transaction: its changes, cursor and the client's confirmed number come from one snapshot.
extension FeedService {
    func applyPush(_ request: PushRequest, userID: String) throws(SyncError) -> PushResponse {
        try Self.checkVersion(request.version)
        try Self.checkSyncID(request.clientID, field: "client id")
        try Self.checkSyncID(userID, field: "user id")
        guard request.mutations.count <= SyncProtocol.maximumPushSize else {
            throw .invalidRequest("a push carries at most \(SyncProtocol.maximumPushSize) mutations, not \(request.mutations.count)")
        }
        var previous: Int64 = 0
        for mutation in request.mutations {
            guard mutation.number > previous else {
                throw .invalidRequest("mutation numbers must be positive and strictly increasing (\(mutation.number) after \(previous))")
            }
            previous = mutation.number
        }
        var last: Int64 = 0
        var start = request.mutations.startIndex
        while start < request.mutations.endIndex {
            let posts = request.mutations[start].kind == .createPost
            var end = start
            while end < request.mutations.endIndex, (request.mutations[end].kind == .createPost) == posts { end += 1 }
            last = max(last, try applyPushRun(Array(request.mutations[start..<end]), clientID: request.clientID, userID: userID))
            start = end
        }
        do {
            return try backend.read { tx in
                let state = try tx.syncSource.syncClient(request.clientID)
                if let owner = state?.userID, owner != userID { throw SourceRefusal.anotherUser }
                var rejected: [SyncRejection] = []
                if let first = request.mutations.first?.number, let highest = request.mutations.last?.number {
                    rejected = try tx.syncSource.syncRejections(clientID: request.clientID, numbers: first...highest).map {
                        SyncRejection(number: $0.number, reason: $0.reason)
                    }
                }
                return PushResponse(lastMutation: max(last, state?.lastMutation ?? 0), rejected: rejected)
            }
        } catch SourceRefusal.anotherUser {
            throw .clientOfAnotherUser(clientID: request.clientID)
        } catch {
            throw SyncError.wrap(FeedError.wrap(error))
        }
    }

    /// Applies one run of mutations of one kind (likes and unlikes, or new posts) in one transaction; returns the
    /// client's highest handled number afterwards.
    private func applyPushRun(_ run: [SyncMutation], clientID: String, userID: String) throws(SyncError) -> Int64 {
        let now = date.now
        do {
            return try commit(value: nil, command: "sync push") { tx, events in
                let source = tx.syncSource
                let client = try source.claimSyncClient(clientID, userID: userID, at: now)
                guard client.userID == userID else {
                    throw StorageError.constraintViolation(field: "client id", reason: "belongs to another user")
                }
                let handled = client.lastMutation
                guard try tx.userKey(for: userID) != nil else { throw StorageError.userNotFound(userID) }
                let fresh = run.filter { $0.number > handled }
                guard let highest = fresh.last?.number else { return handled }
                var rejected: [(Int64, String)] = []
                var valid: [SyncMutation] = []
                for mutation in fresh {
                    if let reason = Self.invalidity(of: mutation) {
                        rejected.append((mutation.number, reason))
                    } else {
                        valid.append(mutation)
                    }
                }
                if run[0].kind == .createPost {
                    var created: [SyncMutation] = []
                    for mutation in valid {
                        do {
                            _ = try tx.savepoint {
                                try tx.insertPost(id: mutation.postID, authorID: userID, body: mutation.body ?? "", at: now)
                            }
                            created.append(mutation)
                        } catch let error as StorageError where FeedError(error).category == .data {
                            rejected.append((mutation.number, FeedError(error, value: mutation.postID).description))
                        }
                    }
                    // Events last, after every row change (FeedTransaction.appendEvent).
                    for mutation in created {
                        events.append(
                            try tx.appendEvent(kind: .postCreated, userID: userID, postID: mutation.postID, likeCount: nil, at: now))
                    }
                } else {
                    events += try Self.applyPushedLikes(valid, userID: userID, at: now, in: tx, rejecting: &rejected)
                }
                try source.recordSyncRejections(
                    rejected.map { SyncRejectionRecord(number: $0.0, reason: $0.1) }, clientID: clientID, at: now)
                try source.recordSyncHandled(clientID: clientID, through: highest, lastSeq: try tx.lastSeq())
                return highest
            }
        } catch {
            if case .invalidValue(field: "client id", _, _) = error { throw .clientOfAnotherUser(clientID: clientID) }
            if case .userNotFound(let id) = error { throw .accountNotFound(userID: id, replica: nil) }
            throw SyncError.wrap(error)
        }
    }

    func answerPull(_ request: PullRequest, userID: String) throws(SyncError) -> PullResponse {
        try Self.checkVersion(request.version)
        try Self.checkSyncID(request.clientID, field: "client id")
        try Self.checkSyncID(userID, field: "user id")
        if let after = request.after, after < 0 { throw .invalidRequest("the cursor must not be negative") }
        guard request.bulkGeneration >= 0 else { throw .invalidRequest("the bulk generation must not be negative") }
        let limit = request.limit ?? 1_000
        guard (1...SyncProtocol.maximumPullSize).contains(limit) else {
            throw .invalidRequest("the limit must be 1 to \(SyncProtocol.maximumPullSize), not \(limit)")
        }
        do {
            return try backend.read { tx in
                guard let viewerKey = try tx.userKey(for: userID) else { throw SourceRefusal.unknownUser }
                let client = try tx.syncSource.syncClient(request.clientID)
                if let owner = client?.userID, owner != userID { throw SourceRefusal.anotherUser }
                let baseline = try tx.replayBaseline()
                let head = try tx.lastSeq()
                if let snapshot = request.snapshot {
                    guard (0...head).contains(snapshot.through), snapshot.bulkGeneration >= 0 else { throw SourceRefusal.badSnapshot }
                    return try Self.snapshotPage(at: snapshot, viewerKey: viewerKey, client: client, head: head, limit: limit, in: tx)
                }
                let position = request.after.map { SubscriberPosition(lastSeq: $0, bulkGeneration: request.bulkGeneration) }
                // A cursor beyond the head, or whose seq now names another event than the replica's (the log was
                // rewritten: a failover, a restore), is answered with a snapshot, as one the log cannot serve.
                if let position, position.lastSeq <= head, baseline.rebuildPoint(for: position) == nil,
                    try !Self.namesAnotherEvent(position.lastSeq, check: request.afterCheck, in: tx)
                {
                    let events = try tx.syncSource.syncEvents(after: position.lastSeq, limit: limit)
                    // An erasure names nobody in the log: a snapshot shows the replica which user and posts are gone.
                    if events.contains(where: { $0.record.kind == .userDeleted }) {
                        let start = SyncSnapshotPosition(through: head, bulkGeneration: baseline.bulkGeneration, resync: true)
                        return try Self.snapshotPage(at: start, viewerKey: viewerKey, client: client, head: head, limit: limit, in: tx)
                    }
                    let through = events.last?.record.seq ?? position.lastSeq
                    let confirmed = client.flatMap { $0.lastMutationSeq <= through ? $0.lastMutation : nil }
                    return PullResponse(
                        changes: events.compactMap { Self.change(for: $0, viewer: userID) }, snapshot: nil, resync: false,
                        through: through, bulkGeneration: baseline.bulkGeneration, hasMore: events.count == limit,
                        lastMutation: confirmed.flatMap { $0 > 0 ? $0 : nil },
                        throughCheck: events.last.map(\.record.check) ?? request.afterCheck)
                }
                let start = SyncSnapshotPosition(through: head, bulkGeneration: baseline.bulkGeneration, resync: request.after != nil)
                return try Self.snapshotPage(at: start, viewerKey: viewerKey, client: client, head: head, limit: limit, in: tx)
            }
        } catch SourceRefusal.anotherUser {
            throw .clientOfAnotherUser(clientID: request.clientID)
        } catch SourceRefusal.unknownUser {
            throw .accountNotFound(userID: userID, replica: nil)
        } catch SourceRefusal.badSnapshot {
            throw .invalidRequest("the snapshot position is not one this source gave")
        } catch {
            throw SyncError.wrap(FeedError.wrap(error))
        }
    }

    /// One page of a snapshot: up to `limit` users after the position's, then (once every user was sent) posts after
    /// its post — two statements at most, whatever the source's size.
    private static func snapshotPage(
        at position: SyncSnapshotPosition, viewerKey: Int64, client: SyncClientRecord?, head: Int64, limit: Int,
        in tx: any FeedTransaction
    ) throws -> PullResponse {
        var next = position
        var users: [SyncSnapshot.User] = []
        if !position.usersDone {
            let page = try tx.syncSource.snapshotUsers(after: position.userAfter, limit: limit)
            users = page.map { SyncSnapshot.User(id: $0.id, name: $0.name, createdAt: millis($0.createdAt)) }
            next.userAfter = page.last?.id ?? position.userAfter
            next.usersDone = page.count < limit
        }
        var posts: [SyncSnapshot.Post] = []
        var done = false
        if next.usersDone {
            let room = limit - users.count
            let rows = room > 0 ? try tx.syncSource.snapshotPosts(viewerKey: viewerKey, after: position.postAfter, limit: room) : []
            posts = rows.map { row in
                SyncSnapshot.Post(
                    id: row.post.id, authorID: row.post.authorID, body: row.post.body, createdAt: millis(row.post.createdAt),
                    likeCount: row.post.likeCount, liked: row.liked)
            }
            next.postAfter = rows.last.map { FeedCursor(after: $0.post) } ?? position.postAfter
            done = rows.count < room
        }
        // The last page confirms the mutations whose effect the snapshot's seq includes; later pages may show more,
        // which the log's replay from that seq confirms.
        let confirmed = done ? client.flatMap { $0.lastMutationSeq <= position.through ? $0.lastMutation : nil } : nil
        let check = done && position.through > 0 ? try tx.events(after: position.through - 1, limit: 1).first : nil
        return PullResponse(
            changes: [], snapshot: SyncSnapshot(users: users, posts: posts), resync: position.resync, through: position.through,
            bulkGeneration: position.bulkGeneration, hasMore: !done || head > position.through,
            lastMutation: confirmed.flatMap { $0 > 0 ? $0 : nil }, nextSnapshot: done ? nil : next,
            throughCheck: check.flatMap { $0.seq == position.through ? $0.check : nil })
    }

    /// Whether the log's event at `seq` is not the one whose ``EventRecord/check`` a replica sent: its cursor stands on
    /// another history of the log. `false` when the replica sent none, or the log has no event at `seq`.
    private static func namesAnotherEvent(_ seq: Int64, check: Int64?, in tx: any FeedTransaction) throws -> Bool {
        guard let check, seq > 0, let event = try tx.events(after: seq - 1, limit: 1).first, event.seq == seq else { return false }
        return event.check != check
    }

    // MARK: - Helpers

    private enum SourceRefusal: Error {
        case anotherUser, unknownUser, badSnapshot
    }

    /// How the replica's user sees one event of the source, or `nil` for one a replica does not apply: an erasure
    /// (answered with a snapshot instead), and the creation of a user or post that is gone since (an erased user, a
    /// deleted post).
    private static func change(for source: SyncSourceEvent, viewer: String) -> SyncChange? {
        let event = source.record.seen(by: viewer)
        let at = millis(event.at)
        switch event.kind {
        case .userCreated:
            guard !event.userID.isEmpty else { return nil }
            return SyncChange(seq: event.seq, kind: .user, userID: event.userID, name: source.userName ?? "", at: at)
        case .postCreated:
            guard !event.userID.isEmpty, source.postBody != nil else { return nil }
            return SyncChange(
                seq: event.seq, kind: .post, userID: event.userID, postID: event.postID, body: source.postBody ?? "",
                likeCount: source.postBody == nil ? nil : 0, at: at)
        case .liked, .unliked:
            // Only the viewer's own: another user's like is a count change once seen by the viewer.
            return SyncChange(
                seq: event.seq, kind: .like, postID: event.postID, liked: event.kind == .liked, likeCount: event.likeCount, at: at)
        case .likeCountChanged:
            return SyncChange(seq: event.seq, kind: .likeCount, postID: event.postID, likeCount: event.likeCount, at: at)
        case .postDeleted:
            return SyncChange(seq: event.seq, kind: .postDeleted, postID: event.postID, at: at)
        case .userDeleted:
            return nil
        }
    }

    /// Why a mutation can never apply (a malformed id or text), or `nil`.
    private static func invalidity(of mutation: SyncMutation) -> String? {
        do {
            try Validation.checkID(mutation.postID, field: "post id")
            if mutation.kind == .createPost {
                guard let body = mutation.body else { return "a new post needs a body" }
                try Validation.checkBody(body)
            } else if mutation.body != nil {
                return "only a new post has a body"
            }
            return nil
        } catch {
            return FeedError(error, value: mutation.postID).description
        }
    }

    static func checkVersion(_ version: Int) throws(SyncError) {
        guard version == SyncProtocol.version else { throw .unsupportedVersion(version) }
    }

    static func checkSyncID(_ id: String, field: String) throws(SyncError) {
        do {
            try Validation.checkID(id, field: field)
        } catch {
            throw .invalidRequest(FeedError(error, value: id).description)
        }
    }

    static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
}
