internal import FeedCore

extension FeedService {
    /// Hands an event to the configured logger, if any, with the database's password-free location among its fields.
    func log(_ kind: FeedLogEvent.Kind, _ level: FeedLogEvent.Level, _ message: String, _ fields: [String: String] = [:]) {
        guard let logger = configuration.logger else { return }
        var fields = fields
        fields["location"] = backend.traits.location
        logger(FeedLogEvent(kind: kind, level: level, message: message, fields: fields))
    }

    /// Logs a command that took longer than ``Configuration/slowCommandThreshold`` since `started`.
    ///
    /// `command` is evaluated only when the command was slow and a logger listens: naming a like action by string
    /// interpolation reflects the enum, which costs more than the rest of this check on every command.
    ///
    /// - Parameters:
    ///   - command: the command's name (a function name's base, as `#function` gives it, or a like action).
    ///   - commands: how many commands the call ran.
    func noteCommand(_ command: @autoclosure () -> String, commands: Int, since started: ContinuousClock.Instant) {
        guard let threshold = configuration.slowCommandThreshold, configuration.logger != nil else { return }
        let elapsed = ContinuousClock.now - started
        guard elapsed > threshold else { return }
        let name = String(command().prefix { $0 != "(" })
        log(
            .slowCommand, .warning, "\(name) took \(Self.milliseconds(elapsed)) ms (threshold \(Self.milliseconds(threshold)) ms)",
            ["command": name, "commands": "\(commands)", "milliseconds": "\(Self.milliseconds(elapsed))"])
    }

    /// Logs a query that took longer than ``Configuration/slowCommandThreshold`` since `started`.
    func noteQuery(_ query: String, since started: ContinuousClock.Instant) {
        guard let threshold = configuration.slowCommandThreshold, configuration.logger != nil else { return }
        let elapsed = ContinuousClock.now - started
        guard elapsed > threshold else { return }
        let name = String(query.prefix { $0 != "(" })
        log(
            .slowQuery, .warning, "\(name) took \(Self.milliseconds(elapsed)) ms (threshold \(Self.milliseconds(threshold)) ms)",
            ["query": name, "milliseconds": "\(Self.milliseconds(elapsed))"])
    }

    /// Whole milliseconds, for log fields.
    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
