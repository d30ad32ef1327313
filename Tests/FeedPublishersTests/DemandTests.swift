import FeedPublishers
import Testing

@Suite struct DemandTests {
    typealias Demand = Subscribers.Demand

    @Test func finiteDemandsAddSubtractAndMultiply() {
        #expect(Demand.max(2) + Demand.max(3) == .max(5))
        #expect(Demand.max(2) + 3 == .max(5))
        #expect(Demand.max(5) - Demand.max(2) == .max(3))
        #expect(Demand.max(5) - 2 == .max(3))
        #expect(Demand.max(2) - 5 == Demand.none)
        #expect(Demand.max(3) * 4 == .max(12))
        var demand = Demand.max(1)
        demand += 2
        demand -= 1
        demand *= 3
        #expect(demand == .max(6))
    }

    @Test func unlimitedAbsorbsArithmetic() {
        #expect(Demand.unlimited + 5 == .unlimited)
        #expect(Demand.unlimited - 5 == .unlimited)
        #expect(Demand.unlimited - .unlimited == .unlimited)
        #expect(Demand.max(7) - .unlimited == Demand.none)
        #expect(Demand.unlimited * 3 == .unlimited)
        #expect(Demand.max(Int.max - 1) + 10 == .unlimited)
    }

    @Test func comparesWithIntsAndDemands() {
        #expect(Demand.unlimited > 1_000_000)
        #expect(Demand.unlimited > .max(1_000_000))
        #expect(Demand.none < 1)
        #expect(Demand.max(3) == 3)
        #expect(3 == Demand.max(3))
        #expect(Demand.unlimited != Int.max)
        #expect(Demand.max(2) >= 2)
        #expect(Demand.max(2) <= 2)
        #expect(1 < Demand.max(2))
        #expect(Demand.max(1) < Demand.max(2))
    }

    @Test func maxIsNilOnlyForUnlimited() {
        #expect(Demand.unlimited.max == nil)
        #expect(Demand.max(4).max == 4)
        #expect(Demand.none.max == 0)
        #expect(Demand.unlimited.description == "unlimited")
        #expect(Demand.max(4).description == "max(4)")
    }
}
