import FeedDependencies
import Testing

/// The seed's search result.
struct ResultModel: Equatable, Sendable {
    var items: [String]
}

/// Raised by the unimplemented test value.
struct Unimplemented: Error, Equatable {
    let name: String
}

/// Raised by a failing override.
struct NetworkDown: Error, CustomStringConvertible {
    var description: String { "network is down" }
}

/// Seed 001's client: a struct of `@Sendable` closures.
struct APIManager: Sendable {
    var search: @Sendable (String) async throws -> ResultModel
}

extension DependencyValues {
    var apiManager: APIManager {
        get { self[APIManager.self] }
        set { self[APIManager.self] = newValue }
    }
}

extension APIManager: DependencyKey {
    static let liveValue = APIManager(
        search: { query in
            // The real network call goes here.
            ResultModel(items: ["live result for \(query)"])
        }
    )

    static let previewValue = APIManager(
        search: { _ in
            ResultModel(items: ["category 1", "category 2", "category 3", "category 4"])
        }
    )

    static let testValue = APIManager(
        search: { _ in
            DependencyValues.reportIssue("Unimplemented: APIManager.search")
            throw Unimplemented(name: "APIManager.search")
        }
    )
}

/// A search feature answering with `Result`, as in the seed's TCA example.
private struct SearchFeature {
    struct State: Equatable {
        var query = ""
        var results: [String] = []
        var errorMessage: String?
    }

    enum Action: Sendable {
        case search(String)
        case searchResponse(Result<ResultModel, any Error>)
    }

    @Dependency(\.apiManager) var apiManager

    func reduce(into state: inout State, action: Action) -> Effect<Action> {
        switch action {
        case let .search(query):
            state.query = query
            return .run { send in
                do {
                    await send(.searchResponse(.success(try await apiManager.search(query))))
                } catch {
                    await send(.searchResponse(.failure(error)))
                }
            }
        case .searchResponse(.failure(let error)):
            state.results = []
            state.errorMessage = "\(error)"
            return .none
        case let .searchResponse(.success(response)):
            state.results = response.items
            state.errorMessage = nil
            return .none
        }
    }

    /// Sends `action`, runs its effect to the end and feeds back what it sends.
    func run(_ action: Action, on state: inout State) async throws {
        let received = Recorder<Action>()
        try await reduce(into: &state, action: action).perform { received.record($0) }
        for next in received.history {
            try await run(next, on: &state)
        }
    }
}

@Suite struct APIManagerTests {
    @Test func liveContextResolvesTheLiveValue() async throws {
        let sut = DependencyValues(context: .live).apiManager
        #expect(try await sut.search("swift") == ResultModel(items: ["live result for swift"]))
    }

    @Test func previewContextResolvesThePreviewValue() async throws {
        let sut = DependencyValues(context: .preview).apiManager
        #expect(try await sut.search("anything").items.count == 4)
    }

    @Test func testContextResolvesTheUnimplementedTestValueLoudly() async {
        let issues = Recorder<String>()
        await withDependencies {
            $0.context = .test
            $0.issueReporter = issues.reporter
        } operation: {
            @Dependency(\.apiManager) var api
            await #expect(throws: Unimplemented(name: "APIManager.search")) {
                try await api.search("swift")
            }
        }
        #expect(issues.history == ["Unimplemented: APIManager.search"])
    }

    @Test(.dependencies()) func successfulResponseFillsTheResults() async throws {
        try await withDependencies {
            $0.apiManager.search = { query in ResultModel(items: ["\(query) 1", "\(query) 2"]) }
        } operation: {
            let sut = SearchFeature()
            var state = SearchFeature.State()
            try await sut.run(.search("tca"), on: &state)
            #expect(state == SearchFeature.State(query: "tca", results: ["tca 1", "tca 2"], errorMessage: nil))
        }
    }

    @Test(.dependencies()) func failedResponseClearsTheResultsAndKeepsTheError() async throws {
        try await withDependencies {
            $0.apiManager.search = { _ in throw NetworkDown() }
        } operation: {
            let sut = SearchFeature()
            var state = SearchFeature.State(query: "", results: ["stale"], errorMessage: nil)
            try await sut.run(.search("tca"), on: &state)
            #expect(state == SearchFeature.State(query: "tca", results: [], errorMessage: "network is down"))
        }
    }
}
