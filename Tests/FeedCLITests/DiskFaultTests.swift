import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// The disk as a fault, through the built `feedsync` binary on SQLite files.
///
/// A full disk: a small tmpfs mounted for the test (or, where mounting is not allowed, a file size limit set with
/// `ulimit -f`), filled by `post add` until a write fails. A database or directory the user cannot write: the binary
/// runs as `nobody` (root ignores permissions). Every child process runs under `timeout`, and the test also bounds
/// its own wait.
// Blocks: waits for `feedsync` child processes under file-size limits and a lock-holding process.
@Suite(.serialized, .ownThreads) struct DiskFaultTests {
    /// How the disk is made full.
    enum DiskLimit: String, Sendable, CaseIterable, CustomTestStringConvertible {
        /// A 512 KiB tmpfs filled by the database's own writes, grown to 4 MiB when space returns. Where mounting
        /// fails, ``fileSizeLimit`` instead.
        case smallFileSystem
        /// A 512 KiB tmpfs filled by another file while no command has the database open, so that not even a
        /// `-shm` file fits; the file is deleted when space returns. Where mounting fails, ``fileSizeLimit``
        /// instead.
        case smallFileSystemFilledByAnotherFile
        /// `ulimit -f` (RLIMIT_FSIZE) of 160 KiB for the commands that fill it and read it, lifted when space
        /// returns.
        case fileSizeLimit
        var testDescription: String { rawValue }
    }

    /// A database or directory `nobody` cannot write.
    enum ReadOnlyCase: String, Sendable, CaseIterable, CustomTestStringConvertible {
        /// `nobody`'s own database file with mode 0444, in a directory `nobody` owns.
        case readOnlyFile
        /// A root-owned 0644 database, closed cleanly (no `-wal`, no `-shm`), in a root-owned 0555 directory.
        case readOnlyDirectory
        /// A root-owned 0444 database in a root-owned 0555 directory, with its `-wal` (holding a committed like that
        /// is not in the database file yet) and `-shm` files, 0444 too.
        case readOnlyDirectoryWithLog
        var testDescription: String { rawValue }
    }

    /// The bound on every child process, in seconds.
    static let timeout = 60
    /// 160 KiB in `ulimit -f`'s 512-byte blocks (POSIX `sh`).
    static let fileSizeLimitBlocks = 320

    // MARK: - Full disk

    @Test(arguments: DiskLimit.allCases)
    func fullDiskFailsOneWriteWithOneLineAndKeepsEveryAcknowledgedWrite(_ limit: DiskLimit) throws {
        let home = TemporaryDirectory("feedsync-disk")
        let disk = home.file("disk")
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: false)
        var method = limit
        var methodLine = "file size limit (ulimit -f \(Self.fileSizeLimitBlocks), 160 KiB)"
        if limit != .fileSizeLimit {
            if mount("tmpfs", disk, "tmpfs", 0, "size=512k,mode=0755") == 0 {
                home.onRelease { _ = umount2(disk, Int32(MNT_DETACH)) }
                methodLine = "tmpfs of 512 KiB"
            } else {
                let reason = String(cString: strerror(errno))
                method = .fileSizeLimit
                methodLine = "mounting a tmpfs failed (\(reason)): " + methodLine
            }
        }
        let database = disk + "/f.sqlite"
        let limited = method == .fileSizeLimit
        func feedsync(_ arguments: [String], limited: Bool = false) throws -> CLIResult {
            try Self.run(["--db", database] + arguments, home: home.path, fileSizeLimit: limited ? Self.fileSizeLimitBlocks : nil)
        }
        for setUp in [["init"], ["user", "add", "alice"], ["post", "add", "--author", "alice", "--id", "first", "hello"]] {
            let result = try feedsync(setUp)
            try #require(result.status == 0, "\(setUp): \(result.stderr)")
        }

        // Fill: 9,000-character posts until a write fails — after another file took all the space, for that way.
        let filler = disk + "/filler"
        let posts = method == .smallFileSystemFilledByAnotherFile ? 3 : 200
        var acknowledged = ["first"]
        var failure: CLIResult?
        for index in 1...posts + 1 {
            if index == posts + 1, method == .smallFileSystemFilledByAnotherFile {
                methodLine += String(format: ", filled by a file of %.0f KiB", Double(Self.fillWithAFile(filler)) / 1024)
            }
            let id = "big\(index)"
            let body = "post \(index) " + String(repeating: "abcdefghij", count: 899)
            let result = try feedsync(["post", "add", "--author", "alice", "--id", id, body], limited: limited)
            guard result.status == 0 else {
                failure = result
                break
            }
            try #require(result.stdout == id + "\n", "an acknowledged write prints its id: \(result.stdout)")
            acknowledged.append(id)
        }
        let failed = try #require(failure, "\(posts + 1) posts of 9,000 characters fit: the disk never filled")
        try #require(acknowledged.count > 1, "the first write failed: \(failed.stderr)")
        print(
            "DiskFaultTests: full disk by \(methodLine): \(acknowledged.count - 1) posts acknowledged, then: "
                + failed.stderr.trimmingCharacters(in: .newlines))

        // The failing write: status 74, one line naming the file and the fault, nothing on stdout.
        Self.expectOneErrorLine(failed, status: 74, naming: database)
        let line = Self.errorLines(failed).first ?? ""
        #expect(line.contains("the disk is full") || line.contains("cannot write"), "\(line)")
        #expect(line.contains("nothing was written"), "\(line)")

        // While the disk is still full: every acknowledged write is there, the failed one is not, and check passes.
        let feed = try feedsync(["feed", "--json", "--limit", "1000"], limited: limited)
        try #require(feed.status == 0, "feed on a full disk: \(feed.stderr)")
        let ids = try Self.postIDs(feed.stdout)
        #expect(Set(acknowledged).isSubset(of: ids), "missing: \(Set(acknowledged).subtracting(ids).sorted())")
        #expect(ids.count == acknowledged.count, "the failed write left a post: \(ids.subtracting(acknowledged).sorted())")
        let events = try feedsync(["events", "--json"], limited: limited)
        try #require(events.status == 0, "events on a full disk: \(events.stderr)")
        #expect(events.stdout.split(separator: "\n").filter { $0.contains(#""kind":"postCreated""#) }.count == acknowledged.count)
        let fullCheck = try feedsync(["check"], limited: limited)
        #expect(fullCheck.status == 0, "check on a full disk: \(fullCheck.stdout) \(fullCheck.stderr)")

        // Space returns: writes work again and check passes.
        if method == .smallFileSystemFilledByAnotherFile {
            #expect(unlink(filler) == 0)
        } else if method == .smallFileSystem {
            try #require(mount("tmpfs", disk, "tmpfs", UInt(MS_REMOUNT), "size=4m") == 0, "remount: \(String(cString: strerror(errno)))")
        }
        let after = try feedsync(["post", "add", "--author", "alice", "--id", "after", "space is back"])
        #expect(after.status == 0 && after.stdout == "after\n", "\(after.stderr)")
        let like = try feedsync(["--user", "alice", "like", "big1"])
        #expect(like.status == 0, "\(like.stderr)")
        let check = try feedsync(["check"])
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        let everything = try Self.postIDs(try feedsync(["feed", "--json", "--limit", "1000"]).stdout)
        #expect(everything == Set(acknowledged + ["after"]))
    }

    // MARK: - Read-only database or directory

    @Test(.enabled(if: getuid() == 0, "runs feedsync as nobody, which needs root"), arguments: ReadOnlyCase.allCases)
    func readOnlyDatabaseIsReadAsIfWritableAndRefusesWritesInOneLine(_ readOnly: ReadOnlyCase) throws {
        let home = TemporaryDirectory("feedsync-readonly")
        #expect(chmod(home.path, 0o755) == 0)
        let executable = try Self.executableForNobody(in: home)
        let directory = home.file("data")
        let database = directory + "/f.sqlite"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let demo = try Self.run(["--db", database, "demo"], home: home.path)
        try #require(demo.status == 0, "\(demo.stderr)")
        if readOnly == .readOnlyDirectoryWithLog {
            // A reader holds the database open, so the like's process cannot checkpoint its log into the file when it
            // closes; the reader then closes without checkpointing: the -wal holds the like, the -shm its index.
            let holder = try Self.runProcess(
                "/usr/bin/timeout",
                [
                    "-s", "KILL", String(Self.timeout), "/usr/bin/sqlite3", database, ".dbconfig no_ckpt_on_close on",
                    "SELECT count(*) FROM posts;",
                    ".shell /usr/bin/timeout -s KILL \(Self.timeout) '\(executable)' --db '\(database)' --user bob like post1",
                ],
                environment: CLIRun.environment(home: home.path))
            try #require(holder.status == 0 && holder.stdout.contains("liked post1"), "\(holder.stdout) \(holder.stderr)")
            try #require(fileSize(database + "-wal") > 0 && fileSize(database + "-shm") > 0)
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()

        // What the read commands print for the same files where they are writable.
        let copy = home.file("copy")
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: false)
        for name in names { try FileManager.default.copyItem(atPath: directory + "/" + name, toPath: copy + "/" + name) }
        let reads: [[String]] = [["feed"], ["feed", "--json"], ["events"], ["events", "--json"], ["status"], ["check"]]
        var expected: [CLIResult] = []
        for arguments in reads {
            let result = try Self.run(["--db", copy + "/f.sqlite"] + arguments, home: home.path)
            try #require(result.status == 0, "\(arguments) on a writable copy: \(result.stderr)")
            expected.append(result)
        }

        switch readOnly {
        case .readOnlyFile:
            let nobody = try #require(getpwnam("nobody")?.pointee)
            #expect(chown(directory, nobody.pw_uid, nobody.pw_gid) == 0 && chown(database, nobody.pw_uid, nobody.pw_gid) == 0)
            #expect(chmod(directory, 0o755) == 0 && chmod(database, 0o444) == 0)
        case .readOnlyDirectory:
            #expect(chmod(database, 0o644) == 0 && chmod(directory, 0o555) == 0)
        case .readOnlyDirectoryWithLog:
            for name in names { #expect(chmod(directory + "/" + name, 0o444) == 0) }
            #expect(chmod(directory, 0o555) == 0)
        }
        let before = names.map { fileBytes(directory + "/" + $0) }
        func asNobody(_ arguments: [String]) throws -> CLIResult {
            try Self.run(["--db", database] + arguments, home: home.path, user: "nobody", executable: executable)
        }

        for (arguments, writable) in zip(reads, expected) {
            let result = try asNobody(arguments)
            #expect(result.status == 0, "\(readOnly) \(arguments): \(result.stderr)")
            #expect(result.stdout == writable.stdout.replacingOccurrences(of: copy + "/f.sqlite", with: database), "\(arguments)")
            #expect(Self.errorLines(result) == Self.errorLines(writable), "\(arguments)")
        }
        let writes: [[String]] = [
            ["--user", "carol", "like", "post1"], ["post", "add", "--author", "alice", "read-only?"], ["user", "add", "zed"],
        ]
        for arguments in writes {
            let result = try asNobody(arguments)
            Self.expectOneErrorLine(result, status: 74, naming: database)
            #expect(Self.errorLines(result).first?.hasPrefix("Error: cannot write database") == true, "\(result.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == names, "files appeared or went")
        #expect(names.map { fileBytes(directory + "/" + $0) } == before, "a file changed")

        // Writable again: nothing left behind stops the next writer.
        #expect(chmod(directory, 0o777) == 0)
        for name in names { #expect(chmod(directory + "/" + name, 0o666) == 0) }
        let like = try asNobody(["--user", "carol", "like", "post2"])
        #expect(like.status == 0, "\(like.stderr)")
        let check = try asNobody(["check"])
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
    }

    // MARK: - Helpers

    /// Writes a file at `path` until the file system has no room left; returns its size.
    static func fillWithAFile(_ path: String) -> Int {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        var written = 0
        let chunk = [UInt8](repeating: 0x5A, count: 65_536)
        for size in [65_536, 4_096, 512, 1] {
            while chunk.withUnsafeBytes({ write(descriptor, $0.baseAddress, size) }) == size { written += size }
        }
        return written
    }

    /// Expects a failure: `status`, nothing on stdout, exactly one line on stderr, starting with `Error:` and naming
    /// `path`.
    static func expectOneErrorLine(
        _ result: CLIResult, status: Int32, naming path: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == status, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, "stdout: \(result.stdout)", sourceLocation: sourceLocation)
        let lines = errorLines(result)
        #expect(lines.count == 1, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(lines.first?.hasPrefix("Error: ") == true, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(lines.first?.contains("\"\(path)\"") == true, "\(result.stderr)", sourceLocation: sourceLocation)
    }

    /// The lines on stderr, without the complaints of a coverage build's profile runtime (which cannot write its
    /// profile past a file size limit or as `nobody`).
    static func errorLines(_ result: CLIResult) -> [String] {
        result.stderr.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("LLVM Profile") }
    }

    /// The ids of the posts in a `feed --json` page.
    static func postIDs(_ json: String) throws -> Set<String> {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let posts = try #require(object["posts"] as? [[String: Any]])
        return Set(posts.compactMap { $0["id"] as? String })
    }

    /// Runs `feedsync arguments` under `timeout`: as `user` through `runuser`, and with a file size limit through
    /// `sh -c 'ulimit -f N'` when given.
    static func run(
        _ arguments: [String], home: String, user: String? = nil, fileSizeLimit: Int? = nil, executable: String = CLIRun.executable
    ) throws -> CLIResult {
        var environment = CLIRun.environment(home: home)
        // A coverage build's child could not write its profile as another user or past the limit.
        if user != nil || fileSizeLimit != nil { environment["LLVM_PROFILE_FILE"] = "/dev/null" }
        var command = ["/usr/bin/timeout", "-s", "KILL", String(timeout), executable] + arguments
        if let fileSizeLimit { command = ["/bin/sh", "-c", #"ulimit -f "$0" && exec "$@""#, String(fileSizeLimit)] + command }
        if let user {
            let variables = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            command = ["/usr/sbin/runuser", "-u", user, "--", "/usr/bin/env", "-i"] + variables + command
        }
        return try runProcess(command[0], Array(command.dropFirst()), environment: environment, directory: home)
    }

    /// Runs a program to its end with stdin empty, collecting stdout and stderr; records an issue and kills it when
    /// it runs past twice ``timeout`` (the programs it runs are bounded by `timeout` themselves).
    static func runProcess(
        _ executable: String, _ arguments: [String], environment: [String: String], directory: String? = nil
    ) throws -> CLIResult {
        // The child starts with no signal blocked (SpawnedProcess), so SIGXFSZ ends it past its file size limit as
        // it would from a shell.
        let process = try SpawnedProcess(
            executable: executable, arguments: arguments, environment: environment, directory: directory)
        let collected = (out: Collected(), err: Collected())
        let readers = DispatchGroup()
        for (handle, buffer) in [(process.standardOutput!, collected.out), (process.standardError!, collected.err)] {
            DispatchQueue.global().async(group: readers) {
                buffer.text = String(decoding: readAll(handle), as: UTF8.self)
            }
        }
        if !process.waitUntilExit(timeout: Double(2 * timeout)) {
            Issue.record("\(executable) \(arguments) did not end within \(2 * timeout) s")
            process.send(SIGKILL)
            process.waitUntilExit()
        }
        if readers.wait(timeout: .now() + .seconds(timeout)) == .timedOut {
            Issue.record("\(executable) \(arguments): its output did not end (a child kept the pipe open)")
            return CLIResult(status: process.terminationStatus, stdout: "", stderr: "(output did not end)")
        }
        return CLIResult(status: process.terminationStatus, stdout: collected.out.text, stderr: collected.err.text)
    }

    /// The built binary if `nobody` can run it where it is, else a copy in `home`.
    static func executableForNobody(in home: TemporaryDirectory) throws -> String {
        let check = try runProcess(
            "/usr/sbin/runuser", ["-u", "nobody", "--", "/usr/bin/test", "-x", CLIRun.executable],
            environment: CLIRun.environment(home: home.path), directory: home.path)
        if check.status == 0 { return CLIRun.executable }
        let copy = home.file("feedsync")
        try FileManager.default.copyItem(atPath: CLIRun.executable, toPath: copy)
        #expect(chmod(copy, 0o755) == 0)
        return copy
    }
}
