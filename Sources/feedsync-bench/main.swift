// feedsync-bench: runs the workloads of bench/WORKLOADS.md against the public FeedSync API and prints one JSON
// object per run on stdout (progress on stderr). Exit 0 when the run's checks passed, 1 when they failed,
// 2 for a usage or setup error.
import FeedSync
import Foundation

// Before any thread exists, so that the instruction counter (where the machine has one) counts every thread.
InstructionCounter.open()
let argv = Array(CommandLine.arguments.dropFirst())
do {
    let args = try Arguments(argv)
    switch args.command {
    case "agent-writer": try Agents.writer(args)
    case "agent-subscriber": try Agents.subscriber(args)
    case "agent-load": try Agents.load(args)
    case "agent-crash": try Agents.crash(args)
    case "agent-random", "agent-acks": try FaultAgents.run(args)
    case "agent-delete": try DeletionAgent.run(args)
    default: exit(try Workloads.run(args) ? 0 : 1)
    }
} catch {
    FileHandle.standardError.write(Data("feedsync-bench: \(error)\n".utf8))
    exit(2)
}
