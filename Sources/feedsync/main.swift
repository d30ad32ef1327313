// The `feedsync` executable: everything lives in FeedCLI; this file only forwards and exits with its status.
import FeedCLI

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Arguments are decoded strictly: invalid UTF-8 is refused rather than repaired with replacement characters.
let rawArguments = (1..<Int(CommandLine.argc)).map { index in
    CommandLine.unsafeArgv[index].flatMap { String(validatingCString: $0) }
}
exit(await FeedSyncCLI.run(rawArguments: rawArguments))
