import FeedPublishers
import Foundation
import Testing

// Seed 004's example, pasted with SwiftUI removed: the feed list and detail views became a
// class and a struct whose button actions are methods; `.onAppear` became `onAppear()`.
// Swift 6 tweaks: `GlobalEventBridge` is declared `Sendable` (its shared instance is a
// global), the feed list is `@MainActor` and its @Sendable sink closure enters the main actor
// with `MainActor.assumeIsolated` (values arrive through RunLoop.main, i.e. the main queue).

final class GlobalEventBridge: Sendable {
    static let shared = GlobalEventBridge()
    private init() {}

    private let likeEvent = EventPublisher<LikeEvent> {
        print("👍 Like 이벤트 발생: \($0)")
    }

    var likePublisher: AnyPublisher<LikeEvent, Never> {
        likeEvent.publisher()
    }

    func sendLikeEvent(_ event: LikeEvent) {
        likeEvent.send(event)
    }
}

enum LikeEvent {
    case liked(postID: String)
    case unliked(postID: String)
}

@MainActor
final class FeedListView {
    private(set) var likedPostIDs: Set<String> = []
    private var cancellables = Set<AnyCancellable>()

    let allPostIDs = ["post1", "post2", "post3"]

    /// The list's rows: "📝 id" plus "❤️" on liked posts.
    var body: [String] {
        allPostIDs.map { id in likedPostIDs.contains(id) ? "📝 \(id) ❤️" : "📝 \(id)" }
    }

    func onAppear() {
        GlobalEventBridge.shared.likePublisher
            .receive(on: RunLoop.main)
            .sink { [weak self] event in
                MainActor.assumeIsolated {
                    guard let self else { return }
                    switch event {
                    case let .liked(postID):
                        self.likedPostIDs.insert(postID)
                    case let .unliked(postID):
                        self.likedPostIDs.remove(postID)
                    }
                }
            }
            .store(in: &cancellables)
    }
}

struct DetailView {
    let postID: String

    func likeButtonTapped() {
        GlobalEventBridge.shared.sendLikeEvent(.liked(postID: postID))
    }

    func unlikeButtonTapped() {
        GlobalEventBridge.shared.sendLikeEvent(.unliked(postID: postID))
    }
}

@Suite struct SeedLikeBridgeTests {
    @Test @MainActor func feedShowsPostLikedInDetailThenUnliked() async {
        let feed = FeedListView()
        feed.onAppear()
        #expect(feed.body == ["📝 post1", "📝 post2", "📝 post3"])

        DetailView(postID: "post2").likeButtonTapped()
        await drainMainQueue()
        #expect(feed.likedPostIDs == ["post2"])
        #expect(feed.body == ["📝 post1", "📝 post2 ❤️", "📝 post3"])

        DetailView(postID: "post2").unlikeButtonTapped()
        await drainMainQueue()
        #expect(feed.likedPostIDs.isEmpty)
        #expect(feed.body == ["📝 post1", "📝 post2", "📝 post3"])
    }

    @Test func bridgeHandsOutOnlyASubscribeHandle() {
        let handle: Any = GlobalEventBridge.shared.likePublisher
        #expect(handle as? EventPublisher<LikeEvent> == nil)
        #expect(handle as? PassthroughPublisher<LikeEvent, Never> == nil)
    }
}
