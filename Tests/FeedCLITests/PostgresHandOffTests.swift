import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

@testable import FeedCLI

/// The fully static `feedsync` hands `postgresql://` commands to `feedsync-postgres` (Docs/CLI.md, "Install"). The
/// hand-off itself replaces the process, so `.ci/run` checks it with the two real install builds against its server;
/// here: when a build hands off, and every way the hand-off refuses, in one line with exit 74, without exec'ing.
// Blocks: waits for a `feedsync` child process.
@Suite(.ownThreads) struct PostgresHandOffTests {
    let home = TemporaryDirectory("feedsync-handoff")

    @Test func aDynamicBuildWithPostgreSQLOpensItInProcess() {
        #expect(FeedBackends.opensPostgreSQL, "the test runner has the PostgreSQL trait and a dynamic loader")
    }

    @Test func aHelperThatCannotOpenPostgreSQLEitherIsRefusedInsteadOfHandingOffAgain() {
        #expect {
            try PostgresHandOff.handOff(arguments: ["status"], environment: [PostgresHandOff.markerVariable: "1"])
        } throws: { error in
            guard let error = error as? CLIError else { return false }
            return error.exitCode == .database && !error.message.contains("\n")
                && error.message.contains("another feedsync's PostgreSQL helper")
                && error.message.contains("--static-swift-stdlib")
        }
    }

    @Test func aMissingHelperIsNamedWithTheFix() {
        let missing = home.file("no-such-feedsync-postgres")
        #expect {
            try PostgresHandOff.handOff(arguments: ["status"], environment: [PostgresHandOff.helperVariable: missing])
        } throws: { error in
            guard let error = error as? CLIError else { return false }
            return error.exitCode == .database && !error.message.contains("\n") && error.message.contains(missing)
                && error.message.contains("cannot be run") && error.message.contains(PostgresHandOff.helperVariable)
        }
    }

    @Test func aHelperThatIsNotExecutableIsRefused() throws {
        let helper = home.file("feedsync-postgres")
        try Data("#!/bin/sh\nexit 0\n".utf8).write(to: URL(fileURLWithPath: helper))
        #expect {
            try PostgresHandOff.handOff(arguments: ["status"], environment: [PostgresHandOff.helperVariable: helper])
        } throws: { error in
            guard let error = error as? CLIError else { return false }
            return error.exitCode == .database && error.message.contains("Permission denied")
        }
    }

    /// The PostgreSQL-capable build never looks for a helper: a bogus one changes nothing.
    @Test func theDynamicExecutableIgnoresTheHelperVariable() throws {
        guard let location = try TestBackend.postgresql.makeLocation(in: home) else { return }
        let environment = CLIRun.environment(
            home: home.path, ["FEEDSYNC_DB": location, PostgresHandOff.helperVariable: home.file("nothing-here")])
        let status = try CLIRun.run(["status"], environment: environment)
        #expect(status.status == 0, "\(status.stderr.suffix(500))")
        #expect(status.stdout.contains("PostgreSQL"))
    }
}
