#ifndef PUSHDISPATCH_SQLITE_CONFIG_H
#define PUSHDISPATCH_SQLITE_CONFIG_H

#include <sqlite3.h>

/// Turns SQLite's memory statistics off for the whole process (`SQLITE_CONFIG_MEMSTATUS`, 0).
/// `sqlite3_config` is variadic, so Swift cannot call it; GRDB wraps its own calls the same way
/// (GRDBSQLite's shim.h). It only succeeds before SQLite is initialised (the process's first
/// connection): returns 1 when the setting took, 0 when it came too late or was refused.
static inline int pushdispatch_sqlite_memory_statistics_off(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
}

#endif
