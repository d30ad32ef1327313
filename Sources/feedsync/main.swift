// The `feedsync` executable: everything lives in FeedCLI; this file only forwards and exits with its status.
import FeedCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

exit(await FeedSyncCLI.run(arguments: Array(CommandLine.arguments.dropFirst())))
