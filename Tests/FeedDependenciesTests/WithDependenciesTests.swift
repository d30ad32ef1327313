import FeedDependencies
import Foundation
import Testing

/// A plain string dependency for scoping tests.
private enum MarkerKey: DependencyKey {
    static let liveValue = "live"
    static let testValue = "outer"
}

extension DependencyValues {
    fileprivate var marker: String {
        get { self[MarkerKey.self] }
        set { self[MarkerKey.self] = newValue }
    }
}

/// The marker of the current task.
private func currentMarker() -> String {
    DependencyValues.current.marker
}

private struct Boom: Error, Equatable {}

/// Checks that `withDependencies` keeps running on this actor.
private actor Probe {
    func markerInScope() async -> String {
        await withDependencies {
            $0.marker = "actor"
        } operation: {
            await Task.yield()
            self.assertIsolated()
            return currentMarker()
        }
    }
}

@Suite(.dependencies()) struct WithDependenciesTests {
    @Test func operationSeesTheOverrideAndTheOuterScopeDoesNot() {
        let inside = withDependencies {
            $0.marker = "inner"
        } operation: {
            currentMarker()
        }
        #expect(inside == "inner")
        #expect(currentMarker() == "outer")
    }

    @Test func scopesNestAndTheInnermostWins() {
        withDependencies {
            $0.marker = "first"
        } operation: {
            withDependencies {
                $0.marker = "second"
            } operation: {
                #expect(currentMarker() == "second")
            }
            #expect(currentMarker() == "first")
        }
    }

    @Test func asyncLetInheritsTheOverride() async {
        let value = await withDependencies {
            $0.marker = "inner"
        } operation: {
            async let child = currentMarker()
            return await child
        }
        #expect(value == "inner")
    }

    @Test func taskGroupChildrenInheritTheOverride() async {
        let values = await withDependencies {
            $0.marker = "inner"
        } operation: {
            await withTaskGroup(of: String.self) { group in
                for _ in 0..<4 {
                    group.addTask { currentMarker() }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        #expect(values == ["inner", "inner", "inner", "inner"])
    }

    @Test func unstructuredTaskInheritsTheOverride() async {
        let task = withDependencies {
            $0.marker = "inner"
        } operation: {
            Task { currentMarker() }
        }
        #expect(await task.value == "inner")
    }

    @Test func detachedTaskDoesNotInherit() async {
        let seen = await withDependencies {
            $0.marker = "inner"
        } operation: {
            await Task.detached { (currentMarker(), DependencyValues.current.context) }.value
        }
        #expect(seen.0 == "live")
        #expect(seen.1 == .live)
    }

    @Test func siblingTaskDoesNotSeeTheOverride() async {
        let (entered, enteredSignal) = AsyncStream.makeStream(of: Void.self)
        let (checked, checkedSignal) = AsyncStream.makeStream(of: Void.self)
        let seen = await withTaskGroup(of: (String, String).self) { group in
            group.addTask {
                await withDependencies {
                    $0.marker = "overridden by A"
                } operation: {
                    enteredSignal.yield()
                    // Stay inside the scope until the sibling has looked.
                    for await _ in checked { break }
                    return ("A", currentMarker())
                }
            }
            group.addTask {
                for await _ in entered { break }
                let marker = currentMarker()
                checkedSignal.yield()
                return ("B", marker)
            }
            return await group.reduce(into: [String: String]()) { $0[$1.0] = $1.1 }
        }
        #expect(seen == ["A": "overridden by A", "B": "outer"])
    }

    @Test func rethrowsFromTheOperation() {
        #expect(throws: Boom()) {
            try withDependencies { _ in
            } operation: {
                throw Boom()
            }
        }
    }

    @Test func rethrowsFromTheUpdate() async {
        await #expect(throws: Boom()) {
            try await withDependencies { _ in
                throw Boom()
            } operation: {
                await Task.yield()
            }
        }
    }

    @Test func asyncOperationRethrows() async {
        await #expect(throws: Boom()) {
            try await withDependencies {
                $0.marker = "x"
            } operation: {
                await Task.yield()
                throw Boom()
            }
        }
    }

    @Test func nonThrowingUseNeedsNoTry() {
        let value = withDependencies {
            $0.marker = "x"
        } operation: {
            currentMarker()
        }
        #expect(value == "x")
    }

    @Test func neverHopsToTheMainThreadFromANonMainExecutor() async {
        let onMain = await withDependencies {
            $0.marker = "x"
        } operation: {
            await Task.yield()
            return Thread.isMainThread
        }
        #expect(onMain == false)
    }

    @Test func staysOnTheCallersActor() async {
        #expect(await Probe().markerInScope() == "actor")
    }

    @MainActor @Test func staysOnTheMainActorWhenCalledFromIt() async {
        let marker = await withDependencies {
            $0.marker = "main"
        } operation: {
            await Task.yield()
            MainActor.assertIsolated()
            return currentMarker()
        }
        #expect(marker == "main")
    }
}
