import FeedDependencies
import Foundation
import Testing

/// A key with all three values declared.
private enum GreetingKey: DependencyKey {
    static let liveValue = "live"
    static let previewValue = "preview"
    static let testValue = "test"
}

/// A key with only a live value.
enum LiveOnlyKey: DependencyKey {
    static let liveValue = "live only"
}

/// A key with only a test value, as an interface module declares it.
private enum TestOnlyKey: TestDependencyKey {
    static let testValue = "test only"
}

/// A key used only by the prepareLiveValues test (the prepared store is process-wide).
private enum PreparedKey: DependencyKey {
    static let liveValue = "default live"
    static let testValue = "test"
}

extension DependencyValues {
    fileprivate var greeting: String {
        get { self[GreetingKey.self] }
        set { self[GreetingKey.self] = newValue }
    }
}

@Suite struct DependencyValuesTests {
    @Test(arguments: [
        (DependencyContext.live, "live"), (.preview, "preview"), (.test, "test"),
    ])
    func keyResolvesToTheStaticValueOfTheContext(context: DependencyContext, expected: String) {
        let sut = DependencyValues(context: context)
        #expect(sut[GreetingKey.self] == expected)
        #expect(sut.greeting == expected)
    }

    @Test func defaultContextIsLive() {
        #expect(DependencyValues().context == .live)
    }

    @Test func settingThroughTheSubscriptOverridesOnlyThatInstance() {
        var sut = DependencyValues(context: .test)
        let before = sut
        sut[GreetingKey.self] = "override"
        #expect(sut.greeting == "override")
        #expect(before.greeting == "test")
    }

    @Test func overrideSurvivesAContextChange() {
        var sut = DependencyValues(context: .test)
        sut.greeting = "override"
        sut.context = .live
        #expect(sut.greeting == "override")
    }

    @Test func previewDefaultsToLiveForADependencyKey() {
        #expect(DependencyValues(context: .preview)[LiveOnlyKey.self] == "live only")
    }

    @Test func previewDefaultsToTestForATestDependencyKey() {
        #expect(DependencyValues(context: .preview)[TestOnlyKey.self] == "test only")
    }

    @Test func missingTestValueReportsUnimplementedOnceAndFallsBackToLive() {
        let issues = Recorder<String>()
        var sut = DependencyValues(context: .test)
        sut.issueReporter = issues.reporter
        #expect(sut[LiveOnlyKey.self] == "live only")
        #expect(sut[LiveOnlyKey.self] == "live only")
        #expect(issues.history.count == 1)
        #expect(issues.history.first?.contains("Unimplemented dependency: 'LiveOnlyKey'") == true)
    }

    @Test func missingTestValueStopsTheProcessByDefault() async {
        await #expect(processExitsWith: .failure) {
            _ = DependencyValues(context: .test)[LiveOnlyKey.self]
        }
    }

    @Test func keyWithoutLiveValueUsedLiveReportsAndUsesTestValue() {
        let issues = Recorder<String>()
        var sut = DependencyValues(context: .live)
        sut.issueReporter = issues.reporter
        #expect(sut[TestOnlyKey.self] == "test only")
        #expect(issues.history.count == 1)
        #expect(issues.history.first?.contains("TestOnlyKey") == true)
    }

    @Test func changingTheContextStartsFreshDefaults() {
        var sut = DependencyValues(context: .test)
        let first = sut.uuid()
        #expect(sut.uuid() != first)
        sut.context = .preview
        sut.context = .test
        #expect(sut.uuid() == first)
    }

    @Test func copiesShareResolvedDefaults() {
        let sut = DependencyValues(context: .test)
        let copy = sut
        #expect(sut.uuid().uuidString == "00000000-0000-0000-0000-000000000000")
        #expect(copy.uuid().uuidString == "00000000-0000-0000-0000-000000000001")
    }

    @Test func preparedLiveValuesApplyEverywhereLiveButRankBelowOverrides() async {
        @Dependency(PreparedKey.self) var capturedBefore
        #expect(capturedBefore == "default live")

        DependencyValues.prepareLiveValues { $0[PreparedKey.self] = "prepared" }

        #expect(capturedBefore == "prepared")
        #expect(DependencyValues(context: .live)[PreparedKey.self] == "prepared")
        let detached = await Task.detached { DependencyValues.current[PreparedKey.self] }.value
        #expect(detached == "prepared")
        withDependencies {
            $0[PreparedKey.self] = "override"
        } operation: {
            #expect(DependencyValues.current[PreparedKey.self] == "override")
        }
        #expect(DependencyValues(context: .test)[PreparedKey.self] == "test")
    }
}
