// SQLite's C API, plus typed wrappers: sqlite3_db_config is a C variadic, which Swift cannot
// call, and SQLITE_TRANSIENT is a cast Swift does not import.
#include <sqlite3.h>

/// sqlite3_db_config for the options that take an int and an int * (SQLITE_DBCONFIG_DQS_DML, ...).
static inline int tidings_sqlite3_db_config_int(sqlite3 *db, int op, int value) { return sqlite3_db_config(db, op, value, (int *)0); }

/// sqlite3_bind_text with SQLITE_TRANSIENT: SQLite copies the bytes before the call returns.
static inline int tidings_sqlite3_bind_text_transient(sqlite3_stmt *s, int i, const char *text, int n) {
    return sqlite3_bind_text(s, i, text, n, SQLITE_TRANSIENT);
}
