#include "CLibPQ.h"

#include "CDynamicLoad.h"
#include <pthread.h>

// Every libpq function called, resolved by name when the library is loaded.
#define TIDINGS_PQ_FUNCTIONS(X)                                                                    \
    X(PQlibVersion) X(PQconninfoParse) X(PQconninfoFree) X(PQfreemem) X(PQconnectdbParams)         \
    X(PQstatus) X(PQerrorMessage) X(PQfinish) X(PQsetnonblocking) X(PQsocket) X(PQflush)           \
    X(PQisBusy) X(PQconsumeInput) X(PQgetResult) X(PQsendQuery) X(PQsendQueryParams)               \
    X(PQsendPrepare) X(PQsendQueryPrepared) X(PQenterPipelineMode) X(PQexitPipelineMode)           \
    X(PQpipelineSync) X(PQpipelineStatus) X(PQclear) X(PQresultStatus) X(PQresStatus)              \
    X(PQresultErrorMessage) X(PQresultErrorField) X(PQcmdTuples) X(PQntuples) X(PQnfields)         \
    X(PQftype) X(PQgetisnull) X(PQgetvalue)

TIDINGS_DL_TABLE(TIDINGS_PQ_FUNCTIONS)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char error[512];
static int failed;

static void load(void) {
    failed = tidings_dl_load("libpq.so.5", "libpq5", names, slots, slot_count, error, sizeof error);
}

const char *tidings_pq_load(void) {
    pthread_once(&once, load);
    return failed ? error : NULL;
}

// Each wrapper has exactly its libpq function's type (checked here), and forwards.
TIDINGS_PQ_FUNCTIONS(TIDINGS_DL_SAME_TYPE)

int tidings_PQlibVersion(void) { return CALL(PQlibVersion)(); }
PQconninfoOption *tidings_PQconninfoParse(const char *conninfo, char **errmsg) {
    return CALL(PQconninfoParse)(conninfo, errmsg);
}
void tidings_PQconninfoFree(PQconninfoOption *connOptions) { CALL(PQconninfoFree)(connOptions); }
void tidings_PQfreemem(void *ptr) { CALL(PQfreemem)(ptr); }
PGconn *tidings_PQconnectdbParams(const char *const *keywords, const char *const *values, int expand_dbname) {
    return CALL(PQconnectdbParams)(keywords, values, expand_dbname);
}
ConnStatusType tidings_PQstatus(const PGconn *conn) { return CALL(PQstatus)(conn); }
char *tidings_PQerrorMessage(const PGconn *conn) { return CALL(PQerrorMessage)(conn); }
void tidings_PQfinish(PGconn *conn) { CALL(PQfinish)(conn); }
int tidings_PQsetnonblocking(PGconn *conn, int arg) { return CALL(PQsetnonblocking)(conn, arg); }
int tidings_PQsocket(const PGconn *conn) { return CALL(PQsocket)(conn); }
int tidings_PQflush(PGconn *conn) { return CALL(PQflush)(conn); }
int tidings_PQisBusy(PGconn *conn) { return CALL(PQisBusy)(conn); }
int tidings_PQconsumeInput(PGconn *conn) { return CALL(PQconsumeInput)(conn); }
PGresult *tidings_PQgetResult(PGconn *conn) { return CALL(PQgetResult)(conn); }
int tidings_PQsendQuery(PGconn *conn, const char *query) { return CALL(PQsendQuery)(conn, query); }
int tidings_PQsendQueryParams(PGconn *conn, const char *command, int nParams, const Oid *paramTypes,
                              const char *const *paramValues, const int *paramLengths, const int *paramFormats,
                              int resultFormat) {
    return CALL(PQsendQueryParams)(conn, command, nParams, paramTypes, paramValues, paramLengths, paramFormats,
                                   resultFormat);
}
int tidings_PQsendPrepare(PGconn *conn, const char *stmtName, const char *query, int nParams,
                          const Oid *paramTypes) {
    return CALL(PQsendPrepare)(conn, stmtName, query, nParams, paramTypes);
}
int tidings_PQsendQueryPrepared(PGconn *conn, const char *stmtName, int nParams, const char *const *paramValues,
                                const int *paramLengths, const int *paramFormats, int resultFormat) {
    return CALL(PQsendQueryPrepared)(conn, stmtName, nParams, paramValues, paramLengths, paramFormats,
                                     resultFormat);
}
int tidings_PQenterPipelineMode(PGconn *conn) { return CALL(PQenterPipelineMode)(conn); }
int tidings_PQexitPipelineMode(PGconn *conn) { return CALL(PQexitPipelineMode)(conn); }
int tidings_PQpipelineSync(PGconn *conn) { return CALL(PQpipelineSync)(conn); }
PGpipelineStatus tidings_PQpipelineStatus(const PGconn *conn) { return CALL(PQpipelineStatus)(conn); }
void tidings_PQclear(PGresult *res) { CALL(PQclear)(res); }
ExecStatusType tidings_PQresultStatus(const PGresult *res) { return CALL(PQresultStatus)(res); }
char *tidings_PQresStatus(ExecStatusType status) { return CALL(PQresStatus)(status); }
char *tidings_PQresultErrorMessage(const PGresult *res) { return CALL(PQresultErrorMessage)(res); }
char *tidings_PQresultErrorField(const PGresult *res, int fieldcode) {
    return CALL(PQresultErrorField)(res, fieldcode);
}
char *tidings_PQcmdTuples(PGresult *res) { return CALL(PQcmdTuples)(res); }
int tidings_PQntuples(const PGresult *res) { return CALL(PQntuples)(res); }
int tidings_PQnfields(const PGresult *res) { return CALL(PQnfields)(res); }
Oid tidings_PQftype(const PGresult *res, int field_num) { return CALL(PQftype)(res, field_num); }
int tidings_PQgetisnull(const PGresult *res, int tup_num, int field_num) {
    return CALL(PQgetisnull)(res, tup_num, field_num);
}
char *tidings_PQgetvalue(const PGresult *res, int tup_num, int field_num) {
    return CALL(PQgetvalue)(res, tup_num, field_num);
}
