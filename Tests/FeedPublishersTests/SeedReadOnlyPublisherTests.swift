import FeedPublishers
import Testing

// Seed 000's example, pasted with SwiftUI removed: `: ObservableObject` dropped, `@Published`
// became a plain var, the View structs are gone and the builder returns the view model.
// Swift 6 tweaks: the view models are `@MainActor` (so `[weak self]` may be captured by the
// @Sendable sink closure, which runs synchronously on the sender's thread, here the main
// actor), `ExistentialAny` asks for `any ChildViewDependency`.

@MainActor
final class ParentViewModel {
    private(set) var currentValuePublisher: CurrentValuePublisher<Int, Never>

    enum Action {
        case countUpButtonTapped
    }

    func send(action: Action) {
        switch action {
        case .countUpButtonTapped:
            currentValuePublisher.send(currentValuePublisher.value + 1)
        }
    }

    init() {
        self.currentValuePublisher = CurrentValuePublisher<Int, Never>(0)
    }
}

protocol ChildViewDependency {
    var readOnlyCurrentValuePublisher: ReadOnlyCurrentValuePublisher<Int, Never> { get }
}

struct DefaultChildViewDependency: ChildViewDependency {
    var readOnlyCurrentValuePublisher: ReadOnlyCurrentValuePublisher<Int, Never>

    init(readOnlyCurrentValuePublisher: ReadOnlyCurrentValuePublisher<Int, Never>) {
        self.readOnlyCurrentValuePublisher = readOnlyCurrentValuePublisher
    }
}

@MainActor
final class ChildViewModel {

    var count: Int

    private func bind() {
        self.dependency.readOnlyCurrentValuePublisher
            .sink { [weak self] value in
                MainActor.assumeIsolated {
                    guard let self else { return }
                    self.count = value
                }
            }.store(in: &cancellables)
    }

    private let dependency: any ChildViewDependency
    private var cancellables: Set<AnyCancellable>

    init(dependency: any ChildViewDependency) {
        self.dependency = dependency
        self.cancellables = []

        self.count = dependency.readOnlyCurrentValuePublisher.value

        bind()
    }
}

@MainActor
struct ChildViewBuilder {

    func build(
        readOnlyCurrentValuePublisher: ReadOnlyCurrentValuePublisher<Int, Never>
    ) -> ChildViewModel {
        let viewModel = ChildViewModel(
            dependency: DefaultChildViewDependency(readOnlyCurrentValuePublisher: readOnlyCurrentValuePublisher)
        )
        return viewModel
    }
}

@Suite struct SeedReadOnlyPublisherTests {
    @Test @MainActor func childCountFollowsParentTaps() {
        let viewModel = ParentViewModel()
        let child = ChildViewBuilder().build(readOnlyCurrentValuePublisher: viewModel.currentValuePublisher)
        #expect(child.count == 0)
        viewModel.send(action: .countUpButtonTapped)
        #expect(child.count == 1)
        viewModel.send(action: .countUpButtonTapped)
        viewModel.send(action: .countUpButtonTapped)
        #expect(child.count == 3)
        #expect(viewModel.currentValuePublisher.value == 3)
    }

    @Test @MainActor func childBuiltLaterStartsFromTheCurrentCount() {
        let viewModel = ParentViewModel()
        viewModel.send(action: .countUpButtonTapped)
        viewModel.send(action: .countUpButtonTapped)
        let child = ChildViewBuilder().build(readOnlyCurrentValuePublisher: viewModel.currentValuePublisher)
        #expect(child.count == 2)
        viewModel.send(action: .countUpButtonTapped)
        #expect(child.count == 3)
    }

    @Test @MainActor func droppingTheChildEndsItsSubscription() {
        let viewModel = ParentViewModel()
        weak var weakChild: ChildViewModel?
        do {
            let child = ChildViewBuilder().build(readOnlyCurrentValuePublisher: viewModel.currentValuePublisher)
            weakChild = child
            viewModel.send(action: .countUpButtonTapped)
            #expect(child.count == 1)
        }
        #expect(weakChild == nil)
        viewModel.send(action: .countUpButtonTapped)
        #expect(viewModel.currentValuePublisher.value == 2)
    }
}
