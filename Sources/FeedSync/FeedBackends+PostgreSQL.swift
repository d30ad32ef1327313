#if PostgreSQL
    internal import FeedPostgresBackend

    extension FeedBackends {
        /// Whether this program can load libpq (see ``FeedBackends/opensPostgreSQL``).
        static var canLoadLibPQ: Bool { PostgresBackend.canLoadLibPQ }

        /// Opens a PostgreSQL database with the options that apply to it.
        static func openPostgreSQL(_ url: String, options: FeedOpenOptions) throws -> any FeedBackend {
            var postgres = PostgresOptions()
            postgres.maximumConnections = options.maximumConnections
            postgres.statementTimeout = options.statementTimeout
            postgres.responseTimeout = options.responseTimeout
            let mode: PostgresOpenMode =
                switch options.mode {
                case .migrate: .migrate
                case .readCurrent: .readCurrent
                case .inspect: .inspect
                }
            return try PostgresBackend(url: url, options: postgres, mode: mode)
        }
    }
#endif
