// libpq, PostgreSQL's client library (its own TLS through OpenSSL), loaded at first use: the
// binary does not link it (no DT_NEEDED), so a run whose state is SQLite never maps it and the
// ~20 libraries it needs (libssl, GSSAPI, LDAP, SASL: DESIGN §15). Its headers (libpq-dev's,
// via include/postgresql) give the types and constants; its functions are called through the
// tidings_ wrappers below, valid once tidings_pq_load() has returned NULL. Only TidingsPostgres
// imports this module; nothing above it sees a PGconn or a PGresult.
#pragma once
#include "postgresql/libpq-fe.h"

/// Loads libpq.so.5, once per process: NULL, or why not (the soname and the Debian package to
/// install). Thread-safe.
const char *tidings_pq_load(void);

int tidings_PQlibVersion(void);
PQconninfoOption *tidings_PQconninfoParse(const char *conninfo, char **errmsg);
void tidings_PQconninfoFree(PQconninfoOption *connOptions);
void tidings_PQfreemem(void *ptr);
PGconn *tidings_PQconnectdbParams(const char *const *keywords, const char *const *values, int expand_dbname);
ConnStatusType tidings_PQstatus(const PGconn *conn);
char *tidings_PQerrorMessage(const PGconn *conn);
void tidings_PQfinish(PGconn *conn);
int tidings_PQsetnonblocking(PGconn *conn, int arg);
int tidings_PQsocket(const PGconn *conn);
int tidings_PQflush(PGconn *conn);
int tidings_PQisBusy(PGconn *conn);
int tidings_PQconsumeInput(PGconn *conn);
PGresult *tidings_PQgetResult(PGconn *conn);
int tidings_PQsendQuery(PGconn *conn, const char *query);
int tidings_PQsendQueryParams(PGconn *conn, const char *command, int nParams, const Oid *paramTypes,
                              const char *const *paramValues, const int *paramLengths, const int *paramFormats,
                              int resultFormat);
int tidings_PQsendPrepare(PGconn *conn, const char *stmtName, const char *query, int nParams,
                          const Oid *paramTypes);
int tidings_PQsendQueryPrepared(PGconn *conn, const char *stmtName, int nParams, const char *const *paramValues,
                                const int *paramLengths, const int *paramFormats, int resultFormat);
int tidings_PQenterPipelineMode(PGconn *conn);
int tidings_PQexitPipelineMode(PGconn *conn);
int tidings_PQpipelineSync(PGconn *conn);
PGpipelineStatus tidings_PQpipelineStatus(const PGconn *conn);
void tidings_PQclear(PGresult *res);
ExecStatusType tidings_PQresultStatus(const PGresult *res);
char *tidings_PQresStatus(ExecStatusType status);
char *tidings_PQresultErrorMessage(const PGresult *res);
char *tidings_PQresultErrorField(const PGresult *res, int fieldcode);
char *tidings_PQcmdTuples(PGresult *res);
int tidings_PQntuples(const PGresult *res);
int tidings_PQnfields(const PGresult *res);
Oid tidings_PQftype(const PGresult *res, int field_num);
int tidings_PQgetisnull(const PGresult *res, int tup_num, int field_num);
char *tidings_PQgetvalue(const PGresult *res, int tup_num, int field_num);
