import FeedDependencies
import Foundation
import Testing

/// A model that captures its dependencies when created.
private struct Clockwork {
    @Dependency(\.date.now) var now
    @Dependency(\.uuid) var uuid
    @Dependency(UUIDGenerator.self) var uuidByKey
}

@Suite(.dependencies()) struct DependencyWrapperTests {
    @Test func nestedKeyPathReadsTheOverriddenNow() {
        let fixed = Date(timeIntervalSince1970: 1_000)
        withDependencies {
            $0.date.now = fixed
        } operation: {
            @Dependency(\.date.now) var now
            #expect(now == fixed)
        }
    }

    @Test func nestedKeyPathIsEvaluatedOnEveryAccess() {
        let start = Date(timeIntervalSince1970: 0)
        withDependencies {
            $0.date = .incrementing(from: start, by: 60)
        } operation: {
            @Dependency(\.date.now) var now
            #expect(now == start)
            #expect(now == start.addingTimeInterval(60))
        }
    }

    @Test func keyTypeInitializerReadsTheSameValue() {
        let id = UUID(uuidString: "DEADBEEF-0000-0000-0000-000000000000") ?? UUID()
        withDependencies {
            $0.uuid = .constant(id)
        } operation: {
            @Dependency(UUIDGenerator.self) var uuid
            #expect(uuid() == id)
        }
    }

    @Test func wrapperCapturesTheValuesCurrentAtInitialization() {
        let inside = Date(timeIntervalSince1970: 42)
        let createdOutside = Clockwork()
        let createdInside = withDependencies {
            $0.date.now = inside
        } operation: {
            #expect(createdOutside.now == DateGenerator.testReferenceDate)
            return Clockwork()
        }
        #expect(createdInside.now == inside)
        #expect(createdOutside.now == DateGenerator.testReferenceDate)
    }

    @Test func twoCallsThroughOneWrapperGiveTwoIds() {
        let sut = Clockwork()
        #expect(sut.uuid().uuidString == "00000000-0000-0000-0000-000000000000")
        #expect(sut.uuid().uuidString == "00000000-0000-0000-0000-000000000001")
        #expect(sut.uuidByKey().uuidString == "00000000-0000-0000-0000-000000000002")
    }
}
