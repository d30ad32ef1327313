import FeedPublishers
import Testing

@Suite struct SealedHandleTests {
    /// Walks a value's mirror recursively and reports whether any reachable child is a sending type.
    private func containsSender(_ subject: Any, depth: Int = 0) -> Bool {
        if subject is PassthroughPublisher<Int, Never> || subject is CurrentValuePublisher<Int, Never>
            || subject is EventPublisher<Int> || subject is ReadOnlyPassthroughPublisher<Int, Never>
            || subject is ReadOnlyCurrentValuePublisher<Int, Never>
        {
            return true
        }
        guard depth < 32 else { return false }
        let mirror = Mirror(reflecting: subject)
        if let superclass = mirror.superclassMirror, superclass.children.contains(where: { containsSender($0.value, depth: depth + 1) }) {
            return true
        }
        return mirror.children.contains { containsSender($0.value, depth: depth + 1) }
    }

    private func expectSealed(_ handle: AnyPublisher<Int, Never>, sourceLocation: SourceLocation = #_sourceLocation) {
        let erased: Any = handle
        #expect(erased as? PassthroughPublisher<Int, Never> == nil, sourceLocation: sourceLocation)
        #expect(erased as? CurrentValuePublisher<Int, Never> == nil, sourceLocation: sourceLocation)
        #expect(erased as? ReadOnlyPassthroughPublisher<Int, Never> == nil, sourceLocation: sourceLocation)
        #expect(erased as? ReadOnlyCurrentValuePublisher<Int, Never> == nil, sourceLocation: sourceLocation)
        #expect(erased as? EventPublisher<Int> == nil, sourceLocation: sourceLocation)
        #expect(!containsSender(handle), "a Mirror walk must find no sender", sourceLocation: sourceLocation)
    }

    @Test func eventPublisherHandleCannotBeTurnedBackIntoASender() {
        let events = EventPublisher<Int>()
        let handle = events.publisher()
        expectSealed(handle)
        let received = Received<Int>()
        let token = handle.sink { received.append($0) }
        events.send(1)
        #expect(received.values == [1])
        token.cancel()
    }

    @Test func subjectHandlesCannotBeTurnedBackIntoSenders() {
        let passthrough = PassthroughPublisher<Int, Never>()
        let current = CurrentValuePublisher<Int, Never>(0)
        expectSealed(passthrough.eraseToAnyPublisher())
        expectSealed(passthrough.sealed())
        expectSealed(current.eraseToAnyPublisher())
        expectSealed(current.sealed())
        let readOnly: ReadOnlyCurrentValuePublisher<Int, Never> = current
        expectSealed(readOnly.sealed())
        expectSealed(passthrough.map { $0 }.readOnly())
    }

    @Test func mirrorWalkFindsTheSenderInsideAnOperatorChainButNotInASealedHandle() {
        // The walker does find senders where they are stored; the sealed handle stores none.
        let passthrough = PassthroughPublisher<Int, Never>()
        let chain = passthrough.map { $0 + 1 }
        #expect(containsSender(chain))
        expectSealed(chain.sealed())
    }

    @Test func seedSubclassTypesCastBackByDesign() {
        // Documented: a subclass can always be cast back; hand out `sealed()` instead.
        let current = CurrentValuePublisher<Int, Never>(0)
        let readOnly: ReadOnlyCurrentValuePublisher<Int, Never> = current
        #expect(readOnly as? CurrentValuePublisher<Int, Never> != nil)
        let passthrough = PassthroughPublisher<Int, Never>()
        let readOnlyPassthrough: ReadOnlyPassthroughPublisher<Int, Never> = passthrough
        #expect(readOnlyPassthrough as? PassthroughPublisher<Int, Never> != nil)
    }
}
