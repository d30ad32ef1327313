import FeedDependencies
import Foundation
import Testing

/// Seed 001's reducer, pasted as a user writes it (with `.seconds` for the seed's `.second`).
private struct UUIDFeature {
    struct State: Equatable {
        var time: Date?
        var uuid: String
    }

    enum Action: Equatable, Sendable {
        case tappedUUIDButton
        case setNewUUID
    }

    @Dependency(\.date.now) var now
    @Dependency(\.uuid) var uuid
    @Dependency(\.continuousClock) var clock

    func reduce(into state: inout State, action: Action) -> Effect<Action> {
        switch action {
        case .tappedUUIDButton:
            // 디펜던시로 uuid를 만듬
            state.time = now
            state.uuid = uuid().uuidString
            return .run { send in
                try await clock.sleep(for: .seconds(1))
                await send(.setNewUUID)
            }
        case .setNewUUID:
            state.uuid = uuid().uuidString
            return .none
        }
    }
}

@MainActor @Suite(.dependencies()) struct SeedReducerTests {
    @Test func tapMakesAnIdAtOnceAndAnotherOneSecondLater() async throws {
        let clock = TestClock()
        let tappedAt = Date(timeIntervalSince1970: 1_700_000_000)
        let sut = withDependencies {
            $0.date.now = tappedAt
            $0.uuid = .incrementing
            $0.continuousClock = clock
        } operation: {
            UUIDFeature()
        }
        var state = UUIDFeature.State(time: nil, uuid: "")

        let effect = sut.reduce(into: &state, action: .tappedUUIDButton)
        #expect(state == UUIDFeature.State(time: tappedAt, uuid: "00000000-0000-0000-0000-000000000000"))

        let received = Recorder<UUIDFeature.Action>()
        let running = Task { try await effect.perform { received.record($0) } }
        #expect(await eventually { clock.sleeperCount == 1 })

        await clock.advance(by: .milliseconds(999))
        #expect(received.history.isEmpty)

        await clock.advance(by: .milliseconds(1))
        #expect(await eventually { received.history == [.setNewUUID] })
        try await running.value

        for action in received.history {
            guard case .none = sut.reduce(into: &state, action: action) else {
                Issue.record("setNewUUID should not start an effect")
                return
            }
        }
        #expect(state == UUIDFeature.State(time: tappedAt, uuid: "00000000-0000-0000-0000-000000000001"))
    }

    @Test func withTheDefaultTestValuesTheEffectFinishesAtOnce() async throws {
        let sut = UUIDFeature()
        var state = UUIDFeature.State(time: nil, uuid: "")
        let effect = sut.reduce(into: &state, action: .tappedUUIDButton)
        #expect(state.time == DateGenerator.testReferenceDate)
        let received = Recorder<UUIDFeature.Action>()
        try await effect.perform { received.record($0) }
        #expect(received.history == [.setNewUUID])
        _ = sut.reduce(into: &state, action: .setNewUUID)
        #expect(state.uuid == "00000000-0000-0000-0000-000000000001")
    }
}
