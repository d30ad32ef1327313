import FeedDependencies
import Foundation
import Testing

@Suite(.dependencies()) struct DateGeneratorTests {
    @Test func testValueIsTheFixedReferenceDate() {
        @Dependency(\.date) var date
        #expect(date() == DateGenerator.testReferenceDate)
        #expect(date.now == DateGenerator.testReferenceDate)
    }

    @Test func constantAlwaysReturnsItsDate() {
        let fixed = Date(timeIntervalSince1970: 123)
        let sut = DateGenerator.constant(fixed)
        #expect(sut() == fixed)
        #expect(sut.now == fixed)
    }

    @Test func settingNowReplacesTheGeneratorWithAConstant() {
        var sut = DateGenerator.live
        let fixed = Date(timeIntervalSince1970: 5)
        sut.now = fixed
        #expect(sut() == fixed)
        #expect(sut() == fixed)
    }

    @Test func incrementingCountsAcrossCopies() {
        let start = Date(timeIntervalSince1970: 0)
        let sut = DateGenerator.incrementing(from: start, by: 2)
        let copy = sut
        #expect(sut() == start)
        #expect(copy() == start.addingTimeInterval(2))
        #expect(sut.now == start.addingTimeInterval(4))
    }

    @Test func liveReturnsTheSystemTime() {
        let before = Date()
        let now = DateGenerator.live()
        let after = Date()
        #expect(before <= now && now <= after)
    }

    @Test func liveContextUsesTheSystemClock() {
        let before = Date()
        let now = DependencyValues(context: .live).date.now
        #expect(now >= before)
    }
}
