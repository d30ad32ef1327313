import FeedDependencies
import Testing

/// Runs a test (or every test of a suite) in the test dependency context, with dependency
/// issues recorded as test failures and `update` applied: `@Test(.dependencies { $0.uuid = .incrementing })`.
///
/// Scopes nest: a suite's trait applies first and a test's trait inside it, so the innermost
/// override wins.
struct DependencyTrait: TestTrait, SuiteTrait, TestScoping {
    /// Overrides applied on top of the test context.
    let update: @Sendable (inout DependencyValues) -> Void

    var isRecursive: Bool { true }

    func provideScope(
        for test: Test,
        testCase: Test.Case?,
        performing function: @concurrent @Sendable () async throws -> Void
    ) async throws {
        try await withDependencies {
            $0.context = .test
            $0.issueReporter = DependencyIssueReporter { message in
                Issue.record(Comment(rawValue: message))
            }
            update(&$0)
        } operation: {
            try await function()
        }
    }
}

extension Trait where Self == DependencyTrait {
    /// Runs in the test dependency context with `update` applied.
    static func dependencies(
        _ update: @escaping @Sendable (inout DependencyValues) -> Void = { _ in }
    ) -> Self {
        DependencyTrait(update: update)
    }
}
