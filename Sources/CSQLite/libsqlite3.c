#include "CSQLite.h"

#include "CDynamicLoad.h"
#include <pthread.h>

// The SQLite functions with a wrapper of the same type, and all SQLite functions called
// (those two more, behind the typed helpers at the end), resolved by name when the library is loaded.
#define TIDINGS_SQLITE3_WRAPPED(X)                                                                  \
    X(sqlite3_open_v2) X(sqlite3_close_v2) X(sqlite3_errmsg) X(sqlite3_errstr)                      \
    X(sqlite3_extended_result_codes) X(sqlite3_busy_timeout) X(sqlite3_get_autocommit)              \
    X(sqlite3_changes) X(sqlite3_exec) X(sqlite3_prepare_v3) X(sqlite3_finalize) X(sqlite3_reset)   \
    X(sqlite3_clear_bindings) X(sqlite3_step) X(sqlite3_bind_parameter_count) X(sqlite3_bind_null)  \
    X(sqlite3_bind_int64) X(sqlite3_bind_double) X(sqlite3_column_count) X(sqlite3_column_type)     \
    X(sqlite3_column_int64) X(sqlite3_column_double) X(sqlite3_column_text) X(sqlite3_column_blob)  \
    X(sqlite3_column_bytes)
#define TIDINGS_SQLITE3_FUNCTIONS(X) TIDINGS_SQLITE3_WRAPPED(X) X(sqlite3_bind_text) X(sqlite3_db_config)

TIDINGS_DL_TABLE(TIDINGS_SQLITE3_FUNCTIONS)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char error[512];
static int failed;

static void load(void) {
    failed = tidings_dl_load("libsqlite3.so.0", "libsqlite3-0", names, slots, slot_count, error, sizeof error);
}

const char *tidings_sqlite3_load(void) {
    pthread_once(&once, load);
    return failed ? error : NULL;
}

// Each wrapper has exactly its SQLite function's type (checked here), and forwards.
TIDINGS_SQLITE3_WRAPPED(TIDINGS_DL_SAME_TYPE)

int tidings_sqlite3_open_v2(const char *filename, sqlite3 **ppDb, int flags, const char *zVfs) {
    return CALL(sqlite3_open_v2)(filename, ppDb, flags, zVfs);
}
int tidings_sqlite3_close_v2(sqlite3 *db) { return CALL(sqlite3_close_v2)(db); }
const char *tidings_sqlite3_errmsg(sqlite3 *db) { return CALL(sqlite3_errmsg)(db); }
const char *tidings_sqlite3_errstr(int code) { return CALL(sqlite3_errstr)(code); }
int tidings_sqlite3_extended_result_codes(sqlite3 *db, int onoff) {
    return CALL(sqlite3_extended_result_codes)(db, onoff);
}
int tidings_sqlite3_busy_timeout(sqlite3 *db, int ms) { return CALL(sqlite3_busy_timeout)(db, ms); }
int tidings_sqlite3_get_autocommit(sqlite3 *db) { return CALL(sqlite3_get_autocommit)(db); }
int tidings_sqlite3_changes(sqlite3 *db) { return CALL(sqlite3_changes)(db); }
int tidings_sqlite3_exec(sqlite3 *db, const char *sql, int (*callback)(void *, int, char **, char **), void *arg,
                         char **errmsg) {
    return CALL(sqlite3_exec)(db, sql, callback, arg, errmsg);
}
int tidings_sqlite3_prepare_v3(sqlite3 *db, const char *zSql, int nByte, unsigned int prepFlags,
                               sqlite3_stmt **ppStmt, const char **pzTail) {
    return CALL(sqlite3_prepare_v3)(db, zSql, nByte, prepFlags, ppStmt, pzTail);
}
int tidings_sqlite3_finalize(sqlite3_stmt *pStmt) { return CALL(sqlite3_finalize)(pStmt); }
int tidings_sqlite3_reset(sqlite3_stmt *pStmt) { return CALL(sqlite3_reset)(pStmt); }
int tidings_sqlite3_clear_bindings(sqlite3_stmt *pStmt) { return CALL(sqlite3_clear_bindings)(pStmt); }
int tidings_sqlite3_step(sqlite3_stmt *pStmt) { return CALL(sqlite3_step)(pStmt); }
int tidings_sqlite3_bind_parameter_count(sqlite3_stmt *pStmt) { return CALL(sqlite3_bind_parameter_count)(pStmt); }
int tidings_sqlite3_bind_null(sqlite3_stmt *pStmt, int i) { return CALL(sqlite3_bind_null)(pStmt, i); }
int tidings_sqlite3_bind_int64(sqlite3_stmt *pStmt, int i, sqlite3_int64 value) {
    return CALL(sqlite3_bind_int64)(pStmt, i, value);
}
int tidings_sqlite3_bind_double(sqlite3_stmt *pStmt, int i, double value) {
    return CALL(sqlite3_bind_double)(pStmt, i, value);
}
int tidings_sqlite3_column_count(sqlite3_stmt *pStmt) { return CALL(sqlite3_column_count)(pStmt); }
int tidings_sqlite3_column_type(sqlite3_stmt *pStmt, int iCol) { return CALL(sqlite3_column_type)(pStmt, iCol); }
sqlite3_int64 tidings_sqlite3_column_int64(sqlite3_stmt *pStmt, int iCol) {
    return CALL(sqlite3_column_int64)(pStmt, iCol);
}
double tidings_sqlite3_column_double(sqlite3_stmt *pStmt, int iCol) { return CALL(sqlite3_column_double)(pStmt, iCol); }
const unsigned char *tidings_sqlite3_column_text(sqlite3_stmt *pStmt, int iCol) {
    return CALL(sqlite3_column_text)(pStmt, iCol);
}
const void *tidings_sqlite3_column_blob(sqlite3_stmt *pStmt, int iCol) { return CALL(sqlite3_column_blob)(pStmt, iCol); }
int tidings_sqlite3_column_bytes(sqlite3_stmt *pStmt, int iCol) { return CALL(sqlite3_column_bytes)(pStmt, iCol); }

int tidings_sqlite3_db_config_int(sqlite3 *db, int op, int value) {
    return CALL(sqlite3_db_config)(db, op, value, (int *)0);
}
int tidings_sqlite3_bind_text_transient(sqlite3_stmt *s, int i, const char *text, int n) {
    return CALL(sqlite3_bind_text)(s, i, text, n, SQLITE_TRANSIENT);
}
