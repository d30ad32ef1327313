/// The smallest effect type a reducer in the style of seed 001 needs.
enum Effect<Action: Sendable>: Sendable {
    /// No work.
    case none
    /// Asynchronous work that may send actions back.
    case run(@Sendable (Send<Action>) async throws -> Void)

    /// Runs the work, delivering sent actions to `receive`.
    func perform(_ receive: @escaping @Sendable (Action) -> Void) async throws {
        switch self {
        case .none: return
        case let .run(work): try await work(Send(receive))
        }
    }
}

/// Sends an action back into the system: `await send(.setNewUUID)`.
struct Send<Action: Sendable>: Sendable {
    private let receive: @Sendable (Action) -> Void

    init(_ receive: @escaping @Sendable (Action) -> Void) {
        self.receive = receive
    }

    func callAsFunction(_ action: Action) async {
        receive(action)
    }
}
