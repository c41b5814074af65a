import GRDB
import GRDBSQLite

/// A prepared statement of the hot paths (the ingestion commit, claims, settlements) bound and stepped through the
/// SQLite C API: no `StatementArguments` (an array of boxed values per row) and no copy of a
/// payload into `Data`. A blob (a payload, a journal) is bound `SQLITE_STATIC` through
/// ``run(pinning:_:)``: SQLite reads it in place while the run keeps it alive; texts are copied.
///
/// Use it inside one `write` or `read` closure, on that closure's connection; every run resets
/// the statement, so GRDB finds it clean.
struct RawStatement {
    /// GRDB's statement, kept alive with this value (an uncached one is finalized with it).
    let prepared: Statement
    let statement: SQLiteStatement
    let connection: SQLiteConnection

    /// `cached`: prepared once per connection (GRDB's cache); `false` for texts of many shapes,
    /// which would grow the cache without bound.
    init(_ db: Database, _ sql: String, cached: Bool = true) throws {
        let prepared = cached ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
        guard let connection = db.sqliteConnection else { throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "the connection is closed") }
        self.prepared = prepared
        self.statement = prepared.sqliteStatement
        self.connection = connection
    }

    /// Runs the statement with `bind` setting its parameters (1-based); returns the number of
    /// rows it changed.
    @discardableResult
    func run(_ bind: (inout Binder) throws -> Void) throws -> Int {
        try run(pinned: nil, bind)
    }

    /// ``run(_:)`` with `bytes` readable through the whole run: `bind` binds them with
    /// ``Binder/bindPinned()`` where they go, and SQLite reads them in place (`SQLITE_STATIC`)
    /// instead of copying them first (a notification's payload, a batch's journal).
    @discardableResult
    func run(pinning bytes: [UInt8], _ bind: (inout Binder) throws -> Void) throws -> Int {
        try bytes.withUnsafeBytes { buffer in try run(pinned: buffer, bind) }
    }

    private func run(pinned: UnsafeRawBufferPointer?, _ bind: (inout Binder) throws -> Void) throws -> Int {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        defer {
            // Before the pinned bytes go: nothing of SQLite refers to them after this.
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        var binder = Binder(statement: statement, connection: connection, pinned: pinned)
        try bind(&binder)
        while true {
            let code = sqlite3_step(statement)
            switch code {
            case SQLITE_DONE:
                return Int(sqlite3_changes(connection))
            case SQLITE_ROW:
                continue
            default:
                throw error(code)
            }
        }
    }

    /// Runs the statement with `bind` setting its parameters and `row` reading each row it
    /// returns (a query, or a statement with `RETURNING`), through the C API: no GRDB `Row`
    /// (a copy of every column into boxed values) per row.
    func query(_ bind: (inout Binder) throws -> Void, row: (Columns) throws -> Void) throws {
        try query(pinned: nil, bind, row: row)
    }

    /// ``query(_:row:)`` with `bytes` bound in place (``run(pinning:_:)``).
    func query(pinning bytes: [UInt8], _ bind: (inout Binder) throws -> Void, row: (Columns) throws -> Void) throws {
        try bytes.withUnsafeBytes { buffer in try query(pinned: buffer, bind, row: row) }
    }

    private func query(pinned: UnsafeRawBufferPointer?, _ bind: (inout Binder) throws -> Void, row: (Columns) throws -> Void) throws {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        var binder = Binder(statement: statement, connection: connection, pinned: pinned)
        try bind(&binder)
        let columns = Columns(statement: statement)
        while true {
            let code = sqlite3_step(statement)
            switch code {
            case SQLITE_DONE:
                return
            case SQLITE_ROW:
                try row(columns)
            default:
                throw error(code)
            }
        }
    }

    /// The current row's columns (0-based), valid only inside ``query(_:row:)``'s closure.
    struct Columns {
        let statement: SQLiteStatement

        func isNull(_ index: CInt) -> Bool { sqlite3_column_type(statement, index) == SQLITE_NULL }

        func int64(_ index: CInt) -> Int64 { sqlite3_column_int64(statement, index) }

        func optionalInt64(_ index: CInt) -> Int64? { isNull(index) ? nil : int64(index) }

        func text(_ index: CInt) -> String {
            guard let bytes = sqlite3_column_text(statement, index) else { return "" }
            let count = Int(sqlite3_column_bytes(statement, index))
            return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        }

        func optionalText(_ index: CInt) -> String? { isNull(index) ? nil : text(index) }

        func blob(_ index: CInt) -> [UInt8] {
            let count = Int(sqlite3_column_bytes(statement, index))
            guard count > 0, let bytes = sqlite3_column_blob(statement, index) else { return [] }
            return [UInt8](UnsafeRawBufferPointer(start: bytes, count: count))
        }
    }

    func error(_ code: CInt) -> DatabaseError {
        let message = sqlite3_errmsg(connection).map { String(cString: $0) }
        return DatabaseError(resultCode: ResultCode(rawValue: sqlite3_extended_errcode(connection)), message: message ?? "SQLite error \(code)")
    }

    /// Sets parameters in order.
    struct Binder {
        let statement: SQLiteStatement
        let connection: SQLiteConnection
        /// The bytes ``RawStatement/run(pinning:_:)`` keeps readable for the run.
        var pinned: UnsafeRawBufferPointer?
        var index: CInt = 1

        /// Binds the pinned bytes as a blob, read in place by SQLite during the run.
        mutating func bindPinned() throws {
            guard let pinned else { throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "no bytes are pinned for this run") }
            guard let length = CInt(exactly: pinned.count) else {
                throw DatabaseError(resultCode: .SQLITE_TOOBIG, message: "a value of \(pinned.count) bytes is too big for SQLite")
            }
            // A zero-length blob still needs a non-null pointer, or SQLite binds NULL.
            try check(sqlite3_bind_blob(statement, index, pinned.baseAddress ?? UnsafeRawPointer(bitPattern: 1), length, sqliteStatic))
        }

        mutating func bind(_ value: Int64) throws {
            try check(sqlite3_bind_int64(statement, index, value))
        }

        mutating func bind(_ value: Int64?) throws {
            if let value { try bind(value) } else { try check(sqlite3_bind_null(statement, index)) }
        }

        mutating func bind(_ value: Bool) throws {
            try bind(Int64(value ? 1 : 0))
        }

        mutating func bind(_ value: String?) throws {
            guard var value else { return try check(sqlite3_bind_null(statement, index)) }
            guard let length = CInt(exactly: value.utf8.count) else {
                throw DatabaseError(resultCode: .SQLITE_TOOBIG, message: "a text of \(value.utf8.count) bytes is too big for SQLite")
            }
            // Bound as a copy (SQLITE_TRANSIENT): a Swift string's bytes may be temporary.
            let statement = statement
            let index = index
            let code = value.withUTF8 { bytes -> CInt in
                guard let base = bytes.baseAddress, length > 0 else { return sqlite3_bind_text(statement, index, "", 0, sqliteTransient) }
                return UnsafeRawPointer(base).withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_bind_text(statement, index, $0, length, sqliteTransient)
                }
            }
            try check(code)
        }

        private mutating func check(_ code: CInt) throws {
            guard code == SQLITE_OK else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot bind parameter \(index)")
            }
            index += 1
        }
    }
}

/// `SQLITE_STATIC`: SQLite reads the bound bytes in place until the statement is reset.
let sqliteStatic = unsafeBitCast(Int(0), to: sqlite3_destructor_type.self)

/// `SQLITE_TRANSIENT`: SQLite copies the bound bytes before the bind call returns.
let sqliteTransient = unsafeBitCast(Int(-1), to: sqlite3_destructor_type.self)
