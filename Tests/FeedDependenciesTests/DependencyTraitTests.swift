import FeedDependencies
import Foundation
import Testing

@Suite(.dependencies { $0.date.now = Date(timeIntervalSince1970: 1) })
struct DependencyTraitTests {
    @Test func suiteTraitAppliesToItsTests() {
        #expect(DependencyValues.current.context == .test)
        #expect(DependencyValues.current.date.now == Date(timeIntervalSince1970: 1))
    }

    @Test(.dependencies { $0.date.now = Date(timeIntervalSince1970: 2) })
    func innermostTraitWins() {
        #expect(DependencyValues.current.date.now == Date(timeIntervalSince1970: 2))
    }

    @Test func eachTestStartsWithFreshDefaults() {
        #expect(DependencyValues.current.uuid().uuidString == "00000000-0000-0000-0000-000000000000")
    }

    @Test func eachTestStartsWithFreshDefaultsToo() {
        #expect(DependencyValues.current.uuid().uuidString == "00000000-0000-0000-0000-000000000000")
    }
}
