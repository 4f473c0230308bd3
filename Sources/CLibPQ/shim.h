// libpq, PostgreSQL's client library (its own TLS through OpenSSL). Only TidingsPostgres
// imports this module; nothing above it sees a PGconn or a PGresult.
#include <libpq-fe.h>
