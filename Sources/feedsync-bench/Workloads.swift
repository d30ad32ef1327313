/// Dispatches `w1` … `w7` (bench/WORKLOADS.md), `w8` (replicas), `w9` (`feedsync serve`) and `w10`
/// (`serve` holding many event streams) (Docs/Performance.md); each prints one JSON line and
/// returns whether its checks passed.
enum Workloads {
    /// Runs the workload named by `args.command`; returns whether its checks passed.
    static func run(_ args: Arguments) throws -> Bool {
        switch args.command {
        case "w1": try W1Toggle.run(args)
        case "w2": try W2Page.run(args)
        case "w3": try W3Fanout.run(args)
        case "w4": try W4Observed.run(args)
        case "w5": try W5CrossProcess.run(args)
        case "w6": try W6CatchUp.run(args)
        case "w7": try W7Concurrent.run(args)
        case "w8": try W8Replica.run(args)
        case "w9": try W9Serve.run(args)
        case "w10": try W10Streams.run(args)
        default: throw BenchError("unknown subcommand \(args.command); use w1 … w10")
        }
    }
}
