import FeedTestThreads
import Testing

/// The test harness's own promise (``OwnThreadsTrait``): a synchronous test of a suite with `.ownThreads` runs on a
/// thread of its own, so blocking it leaves Swift's cooperative pool free for the async work it waits for.
// Keeps the trait to check it: its tests assert that they run on threads of their own.
@Suite(.ownThreads) struct OwnThreadsTests {
    @Test func aSynchronousTestRunsOnAThreadOfItsOwn() {
        #expect(ThreadPerJobExecutor.isCurrent)
    }

    @Test(arguments: [1, 2]) func soDoesEachCaseOfAParameterisedTest(case: Int) {
        #expect(ThreadPerJobExecutor.isCurrent)
    }
}

/// Without the trait a synchronous test runs on the cooperative pool — the reason the trait exists.
@Suite struct WithoutOwnThreadsTests {
    @Test func aSynchronousTestRunsOnThePool() {
        #expect(!ThreadPerJobExecutor.isCurrent)
    }
}
