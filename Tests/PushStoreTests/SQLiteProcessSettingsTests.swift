import Foundation
import GRDB
import GRDBSQLite
@testable import PushStore
import Testing

/// SQLite's process-wide settings (``SQLiteProcessSettings``): made before the process's first
/// connection, by every path of the store that opens one.
@Suite("SQLite: the process's settings")
struct SQLiteProcessSettingsTests {
    @Test("memory statistics are off once a store is open: SQLite counts none of what it allocates, however much")
    func memoryStatisticsOff() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("pushdispatch-sqlite-settings-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = try SQLiteStore(path: folder.appendingPathComponent("store.db").path)
        // A statement that allocates: a megabyte through SQLite's allocator. With the
        // statistics on, the high-water mark would hold at least that.
        let length = try await store.pool.write { db in
            try db.execute(sql: "CREATE TABLE settings_probe (x BLOB)")
            try db.execute(sql: "INSERT INTO settings_probe VALUES (zeroblob(1048576))")
            return try Int.fetchOne(db, sql: "SELECT length(x) FROM settings_probe") ?? 0
        }
        #expect(length == 1_048_576)
        #expect(SQLiteProcessSettings.apply() == .applied)
        #expect(sqlite3_memory_used() == 0)
        #expect(sqlite3_memory_highwater(0) == 0)
    }
}
