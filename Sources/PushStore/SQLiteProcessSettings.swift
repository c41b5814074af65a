import CSQLiteConfig

/// SQLite's settings for the whole process, made once before its first connection.
///
/// **Memory statistics off** (`SQLITE_CONFIG_MEMSTATUS`). With them on (SQLite's default),
/// every allocation and release of SQLite memory takes a process-wide mutex to count it. Debian
/// builds SQLite without its lookaside allocator (`OMIT_LOOKASIDE`), so each small allocation of
/// a statement's step goes to `malloc`, and the writer took and released that mutex dozens of
/// times per record: 4.7 % of the service's CPU in a burst (issue 35, tenth session;
/// docs/benchmarks.md). Nothing here reads the statistics (`sqlite3_memory_used`, a soft heap
/// limit).
///
/// `sqlite3_config` succeeds only before SQLite is initialised, so every path of this package
/// that opens a connection calls ``apply()`` first; a connection opened elsewhere first (another
/// library in the same process) leaves the statistics on, which only costs that CPU.
public enum SQLiteProcessSettings {
    /// What ``apply()`` found: the first call decides, the later ones return the same.
    public enum Outcome: Sendable, Equatable {
        /// The statistics are off.
        case applied
        /// SQLite refused: it was initialised already (a connection opened first).
        case tooLate
    }

    private static let outcome: Outcome = pushdispatch_sqlite_memory_statistics_off() != 0 ? .applied : .tooLate

    /// Applies the settings if no connection was opened yet in this process; safe to call again.
    @discardableResult
    public static func apply() -> Outcome { outcome }
}
