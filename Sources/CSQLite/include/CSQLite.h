// SQLite's C API, loaded at first use: the binary does not link libsqlite3 (no DT_NEEDED), so a
// run that opens no state (`--version`, `config check`, `import`) never maps it (DESIGN §15).
// Its header gives the types and constants; its functions are called through the tidings_
// wrappers below, valid once tidings_sqlite3_load() has returned NULL. Only TidingsSQLite
// imports this module; nothing above it sees a sqlite3 or a sqlite3_stmt.
#pragma once
#include <sqlite3.h>

/// Loads libsqlite3.so.0, once per process: NULL, or why not (the soname and the Debian package
/// to install). Thread-safe.
const char *tidings_sqlite3_load(void);

int tidings_sqlite3_open_v2(const char *filename, sqlite3 **ppDb, int flags, const char *zVfs);
int tidings_sqlite3_close_v2(sqlite3 *db);
const char *tidings_sqlite3_errmsg(sqlite3 *db);
const char *tidings_sqlite3_errstr(int code);
int tidings_sqlite3_extended_result_codes(sqlite3 *db, int onoff);
int tidings_sqlite3_busy_timeout(sqlite3 *db, int ms);
int tidings_sqlite3_get_autocommit(sqlite3 *db);
int tidings_sqlite3_changes(sqlite3 *db);
int tidings_sqlite3_exec(sqlite3 *db, const char *sql, int (*callback)(void *, int, char **, char **), void *arg,
                         char **errmsg);
int tidings_sqlite3_prepare_v3(sqlite3 *db, const char *zSql, int nByte, unsigned int prepFlags,
                               sqlite3_stmt **ppStmt, const char **pzTail);
int tidings_sqlite3_finalize(sqlite3_stmt *pStmt);
int tidings_sqlite3_reset(sqlite3_stmt *pStmt);
int tidings_sqlite3_clear_bindings(sqlite3_stmt *pStmt);
int tidings_sqlite3_step(sqlite3_stmt *pStmt);
int tidings_sqlite3_bind_parameter_count(sqlite3_stmt *pStmt);
int tidings_sqlite3_bind_null(sqlite3_stmt *pStmt, int i);
int tidings_sqlite3_bind_int64(sqlite3_stmt *pStmt, int i, sqlite3_int64 value);
int tidings_sqlite3_bind_double(sqlite3_stmt *pStmt, int i, double value);
int tidings_sqlite3_column_count(sqlite3_stmt *pStmt);
int tidings_sqlite3_column_type(sqlite3_stmt *pStmt, int iCol);
sqlite3_int64 tidings_sqlite3_column_int64(sqlite3_stmt *pStmt, int iCol);
double tidings_sqlite3_column_double(sqlite3_stmt *pStmt, int iCol);
const unsigned char *tidings_sqlite3_column_text(sqlite3_stmt *pStmt, int iCol);
const void *tidings_sqlite3_column_blob(sqlite3_stmt *pStmt, int iCol);
int tidings_sqlite3_column_bytes(sqlite3_stmt *pStmt, int iCol);

/// sqlite3_db_config for the options that take an int and an int * (SQLITE_DBCONFIG_DQS_DML, ...):
/// a C variadic, which Swift cannot call.
int tidings_sqlite3_db_config_int(sqlite3 *db, int op, int value);

/// sqlite3_bind_text with SQLITE_TRANSIENT (a cast Swift does not import): SQLite copies the
/// bytes before the call returns.
int tidings_sqlite3_bind_text_transient(sqlite3_stmt *s, int i, const char *text, int n);
