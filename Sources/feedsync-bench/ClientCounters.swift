import CPerfEvent
import Foundation

/// The instructions this process retires in user space, counted by the CPU (`perf_event_open(2)`,
/// `PERF_COUNT_HW_INSTRUCTIONS`, inherited by every thread created after ``open()``).
///
/// Where the machine exposes no hardware counters (most virtual machines: the call fails with `ENOENT`), or
/// `perf_event_paranoid` forbids them, there is no count: ``read()`` returns `nil` and no figure is reported.
enum InstructionCounter {
    /// The counter's file descriptor, or -1 when it could not be opened. Opened on first use: ``open()``, first
    /// thing in `main`, so that every thread the run creates is counted.
    private static let descriptor: Int32 = feedsync_open_instruction_counter()

    /// Opens the counter (once); call before any thread is created.
    static func open() {
        _ = descriptor
    }

    /// The instructions counted so far (this thread and every thread created since ``open()``), or `nil`.
    static func read() -> UInt64? {
        guard descriptor >= 0 else { return nil }
        var value: UInt64 = 0
        let count = withUnsafeMutableBytes(of: &value) { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        return count == MemoryLayout<UInt64>.size ? value : nil
    }
}

/// This process's CPU time (user + system, every thread: `getrusage(RUSAGE_SELF)`) and user-space instructions
/// (``InstructionCounter``) at one moment; two of them bound a timed part.
struct ClientSample {
    let cpuNanos: UInt64
    let instructions: UInt64?

    /// The counters now.
    static func now() -> ClientSample {
        ClientSample(cpuNanos: processCPUNanos(), instructions: InstructionCounter.read())
    }

    /// Adds `client_cpu_us_per_op` and, where instructions were counted, `client_instructions_per_op` for the span
    /// from `start` to `self` over `ops` operations.
    func addKeys(to line: inout JSONLine, since start: ClientSample, ops: Int) {
        let ops = Double(max(ops, 1))
        line.add("client_cpu_us_per_op", Double(cpuNanos &- start.cpuNanos) / 1000 / ops, digits: 2)
        if let instructions, let before = start.instructions {
            line.add("client_instructions_per_op", Double(instructions &- before) / ops, digits: 0)
        }
    }
}
