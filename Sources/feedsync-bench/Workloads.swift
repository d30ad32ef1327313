/// Dispatches `w1` … `w6`.
enum Workloads {
    /// Runs the workload named by `args.command`; returns whether its checks passed.
    static func run(_ args: Arguments) throws -> Bool {
        throw BenchError("unknown subcommand \(args.command); the workloads are being written")
    }
}
