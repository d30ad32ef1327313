extension DependencyValues {
    /// Installs live values for the whole process; call it once, first thing at the program's
    /// entry point, before any work starts.
    ///
    /// ```swift
    /// @main struct FeedSyncCommand {
    ///     static func main() async throws {
    ///         DependencyValues.prepareLiveValues {
    ///             $0.repository = try .sqlite(path: databasePath)
    ///         }
    ///         …
    ///     }
    /// }
    /// ```
    ///
    /// Every key set in `update` is installed; keys only read are not. Installed values apply in
    /// the ``DependencyContext/live`` context only, rank below overrides made with
    /// `withDependencies`, and are seen by every task, including detached ones and
    /// `@Dependency` wrappers created earlier. Setting `context` inside `update` has no
    /// effect. Calling it again replaces the values of the keys it sets. Thread-safe: `update`
    /// runs outside any lock, then the values are stored under one.
    public static func prepareLiveValues(_ update: (inout DependencyValues) throws -> Void) rethrows {
        var scratch = DependencyValues(context: .live)
        try update(&scratch)
        PreparedLiveValues.shared.install(scratch.overrides)
    }
}
