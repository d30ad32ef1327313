/// The options every command accepts, as given on the command line (before the environment fills gaps).
struct GlobalOptions: Sendable, Hashable {
    /// `--db PATH`.
    var databasePath: String?
    /// `--user ID`.
    var userID: String?
    /// `--json`.
    var json = false
    /// `--no-color`.
    var noColor = false
}
