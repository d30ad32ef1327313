public import Foundation

/// Starts `process` so that the child inherits no descriptor of this process but its standard input, output and
/// error.
///
/// Foundation's `Process.run` closes, in the child, every descriptor number from 3 to the highest one open when it
/// looks; a descriptor another thread opens after that look and numbers above it — a pipe of another test's child,
/// an accepted socket — stays open in the child until it exits. Tests run in parallel, and such a leak shows up far
/// away: a pipe whose end of stream or a socket whose close comes only when an unrelated program exits. This holds
/// descriptor 4095 open for the life of the test process, so every child closes 3…4095.
///
/// Launches are serialized: `Process.run` once crashed in a `memcpy` while many tests launched children at once (a
/// full parallel run), and it returns as soon as the child is spawned, so one at a time costs little.
public func launch(_ process: Process) throws {
    _ = highDescriptor
    try launching.withLock { try process.run() }
}

/// Serializes ``launch(_:)``.
private let launching = NSLock()

/// Descriptor 4095 on `/dev/null` (or nothing, where the limit of open files is lower), made once.
private let highDescriptor: Int32 = {
    let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return -1 }
    defer { close(fd) }
    return fcntl(fd, F_DUPFD_CLOEXEC, 4095)
}()

/// `posix_spawn_file_actions_addclosefrom_np(3)` (glibc 2.34): the child closes every descriptor from `lowest` up.
/// Glibc's Swift module does not declare it (it is a GNU extension), so it is bound by its symbol name.
@discardableResult
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
public func spawnFileActionsAddCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ lowest: Int32) -> Int32
