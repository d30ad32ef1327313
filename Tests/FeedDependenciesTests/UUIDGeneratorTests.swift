import FeedDependencies
import Foundation
import Testing

@Suite(.dependencies()) struct UUIDGeneratorTests {
    @Test func twoCallsThroughDependencyGiveConsecutiveIds() {
        withDependencies {
            $0.uuid = .incrementing
        } operation: {
            @Dependency(\.uuid) var uuid
            #expect(uuid().uuidString == "00000000-0000-0000-0000-000000000000")
            #expect(uuid().uuidString == "00000000-0000-0000-0000-000000000001")
        }
    }

    @Test func copiesOfAnIncrementingGeneratorShareTheCounter() {
        let sut = UUIDGenerator.incrementing
        let copy = sut
        #expect(sut().uuidString == "00000000-0000-0000-0000-000000000000")
        #expect(copy().uuidString == "00000000-0000-0000-0000-000000000001")
        #expect(sut().uuidString == "00000000-0000-0000-0000-000000000002")
    }

    @Test func eachReadOfIncrementingStartsANewCounter() {
        #expect(UUIDGenerator.incrementing() == UUIDGenerator.incrementing())
    }

    @Test func counterReachesTheUpperDigits() {
        let sut = UUIDGenerator.incrementing
        for _ in 0..<255 { _ = sut() }
        #expect(sut().uuidString == "00000000-0000-0000-0000-0000000000FF")
    }

    @Test func concurrentCallsNeverRepeatAnId() async {
        let sut = UUIDGenerator.incrementing
        let ids = await withTaskGroup(of: [UUID].self) { group in
            for _ in 0..<4 {
                group.addTask { (0..<250).map { _ in sut() } }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(Set(ids).count == 1_000)
    }

    @Test func constantAlwaysReturnsItsId() throws {
        let id = try #require(UUID(uuidString: "11111111-2222-3333-4444-555555555555"))
        let sut = UUIDGenerator.constant(id)
        #expect(sut() == id)
        #expect(sut() == id)
    }

    @Test func testValueIsIncrementingFromZero() {
        @Dependency(\.uuid) var uuid
        #expect(uuid().uuidString == "00000000-0000-0000-0000-000000000000")
        #expect(uuid().uuidString == "00000000-0000-0000-0000-000000000001")
    }

    @Test func liveIdsAreRandom() {
        let sut = UUIDGenerator.live
        #expect(sut() != sut())
    }
}
