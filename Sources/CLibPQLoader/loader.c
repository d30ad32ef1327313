// libpq, loaded when FeedSync first talks to PostgreSQL instead of when the program starts.
//
// The program is not linked against libpq: this file defines the libpq functions FeedSync calls, each forwarding
// to the function of the same name in a libpq that `feedsync_libpq_load` opened with dlopen(3). A process that only
// uses SQLite never loads libpq and the ~40 shared libraries it needs (OpenSSL, GSSAPI, LDAP, …), which made up
// most of the command-line tool's start-up time; and a machine without libpq runs everything but PostgreSQL.
//
// Every libpq object (a connection, a result, a parsed URL) comes from one of the two entry points,
// PQconnectStartParams and PQconninfoParse; those check that the library is loaded (FeedSync calls
// feedsync_libpq_load before them and turns a failure into a typed error), so the other forwarders need no check.

#include "CLibPQLoader.h"

#include <dlfcn.h>
#if __has_include(<libpq-fe.h>)
#include <libpq-fe.h>
#elif __has_include(<postgresql/libpq-fe.h>)
#include <postgresql/libpq-fe.h>
#else
#error "libpq-fe.h not found: install libpq's development files (Debian and Ubuntu: apt-get install libpq-dev)"
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__APPLE__)
#define FEEDSYNC_LIBPQ_DEFAULT "libpq.5.dylib"
#else
#define FEEDSYNC_LIBPQ_DEFAULT "libpq.so.5"
#endif

// Every libpq function FeedSync calls. Adding a call to another libpq function means adding it here and a
// forwarder below (the link fails otherwise, naming the function).
#define FEEDSYNC_LIBPQ_FUNCTIONS(X) \
    X(PQbackendPID) X(PQclear) X(PQcmdStatus) X(PQcmdTuples) X(PQconnectPoll) X(PQconnectStartParams) \
    X(PQconninfo) X(PQconninfoFree) X(PQconninfoParse) X(PQconsumeInput) X(PQerrorMessage) X(PQfinish) \
    X(PQfreemem) X(PQftype) X(PQgetResult) X(PQgetisnull) X(PQgetlength) X(PQgetvalue) X(PQisBusy) X(PQnfields) \
    X(PQnotifies) X(PQntuples) X(PQputCopyData) X(PQputCopyEnd) X(PQresultErrorField) X(PQresultErrorMessage) \
    X(PQresultStatus) X(PQsendPrepare) X(PQsendQuery) X(PQsendQueryParams) X(PQsendQueryPrepared) \
    X(PQsetNoticeReceiver) X(PQsocket) X(PQstatus) X(PQtransactionStatus)

#define FEEDSYNC_DECLARE_POINTER(name) static __typeof__(name) *feedsync_##name;
FEEDSYNC_LIBPQ_FUNCTIONS(FEEDSYNC_DECLARE_POINTER)

static pthread_once_t feedsync_libpq_once = PTHREAD_ONCE_INIT;
// Written only inside feedsync_libpq_once's routine (the flag last, atomically); read after pthread_once returned.
static int feedsync_libpq_ready = 0;
static char feedsync_libpq_failure[512];

// The program's dynamic section; absent (NULL) in a fully static executable (`-static-executable`). Such a program
// has its own copy of the C library, and a libpq loaded into it would bring the shared one: two C libraries in one
// process, which crashed (a segmentation fault in `feedsync demo` on PostgreSQL). It refuses instead.
extern const char _DYNAMIC[] __attribute__((weak));

// A library that could not be opened or lacks a function: the reason with its fix, one line.
static void feedsync_libpq_not_loaded(const char *detail) {
    snprintf(
        feedsync_libpq_failure, sizeof feedsync_libpq_failure,
        "PostgreSQL's client library could not be loaded (%s); install libpq (Debian and Ubuntu: apt-get install "
        "libpq5) or set FEEDSYNC_LIBPQ to its path",
        detail);
}

static void feedsync_libpq_open(void) {
    if (!feedsync_libpq_loadable()) {
        snprintf(
            feedsync_libpq_failure, sizeof feedsync_libpq_failure,
            "this program is a fully static executable, which cannot load shared libraries such as libpq; build it "
            "without -static-executable (swift build -c release --static-swift-stdlib) to use PostgreSQL");
        return;
    }
    const char *configured = getenv("FEEDSYNC_LIBPQ");
    const char *name = (configured != NULL && configured[0] != '\0') ? configured : FEEDSYNC_LIBPQ_DEFAULT;
    void *library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *message = dlerror();
        feedsync_libpq_not_loaded(message != NULL ? message : name);
        return;
    }
    char missing[256];
#define FEEDSYNC_RESOLVE(function)                                                 \
    feedsync_##function = (__typeof__(function) *)dlsym(library, #function);      \
    if (feedsync_##function == NULL) {                                             \
        snprintf(missing, sizeof missing, "%s has no function %s", name, #function); \
        feedsync_libpq_not_loaded(missing);                                        \
        dlclose(library);                                                          \
        return;                                                                    \
    }
    FEEDSYNC_LIBPQ_FUNCTIONS(FEEDSYNC_RESOLVE)
#undef FEEDSYNC_RESOLVE
    __atomic_store_n(&feedsync_libpq_ready, 1, __ATOMIC_RELEASE);
}

int feedsync_libpq_loadable(void) { return _DYNAMIC != NULL; }

int feedsync_libpq_load(char *reason, size_t capacity) {
    pthread_once(&feedsync_libpq_once, feedsync_libpq_open);
    int ready = __atomic_load_n(&feedsync_libpq_ready, __ATOMIC_ACQUIRE);
    if (!ready && reason != NULL && capacity > 0) {
        snprintf(reason, capacity, "%s", feedsync_libpq_failure);
    }
    return ready;
}

// The entry points: a call without a loaded library is a FeedSync bug, stopped with a message rather than a
// jump through a null pointer.
static void feedsync_libpq_require(const char *function) {
    if (!feedsync_libpq_load(NULL, 0)) {
        fprintf(stderr, "FeedSync: %s called but libpq is not loaded: %s\n", function, feedsync_libpq_failure);
        abort();
    }
}

PGconn *PQconnectStartParams(const char *const *keywords, const char *const *values, int expand_dbname) {
    feedsync_libpq_require("PQconnectStartParams");
    return feedsync_PQconnectStartParams(keywords, values, expand_dbname);
}

PQconninfoOption *PQconninfoParse(const char *conninfo, char **errmsg) {
    feedsync_libpq_require("PQconninfoParse");
    return feedsync_PQconninfoParse(conninfo, errmsg);
}

// The rest take an object that one of the entry points made.
int PQbackendPID(const PGconn *conn) { return feedsync_PQbackendPID(conn); }
void PQclear(PGresult *res) { feedsync_PQclear(res); }
char *PQcmdStatus(PGresult *res) { return feedsync_PQcmdStatus(res); }
char *PQcmdTuples(PGresult *res) { return feedsync_PQcmdTuples(res); }
PostgresPollingStatusType PQconnectPoll(PGconn *conn) { return feedsync_PQconnectPoll(conn); }
PQconninfoOption *PQconninfo(PGconn *conn) { return feedsync_PQconninfo(conn); }
void PQconninfoFree(PQconninfoOption *connOptions) { feedsync_PQconninfoFree(connOptions); }
int PQconsumeInput(PGconn *conn) { return feedsync_PQconsumeInput(conn); }
char *PQerrorMessage(const PGconn *conn) { return feedsync_PQerrorMessage(conn); }
void PQfinish(PGconn *conn) { feedsync_PQfinish(conn); }
void PQfreemem(void *ptr) { feedsync_PQfreemem(ptr); }
Oid PQftype(const PGresult *res, int field_num) { return feedsync_PQftype(res, field_num); }
PGresult *PQgetResult(PGconn *conn) { return feedsync_PQgetResult(conn); }
int PQgetisnull(const PGresult *res, int tup_num, int field_num) { return feedsync_PQgetisnull(res, tup_num, field_num); }
int PQgetlength(const PGresult *res, int tup_num, int field_num) { return feedsync_PQgetlength(res, tup_num, field_num); }
char *PQgetvalue(const PGresult *res, int tup_num, int field_num) { return feedsync_PQgetvalue(res, tup_num, field_num); }
int PQnfields(const PGresult *res) { return feedsync_PQnfields(res); }
PGnotify *PQnotifies(PGconn *conn) { return feedsync_PQnotifies(conn); }
int PQntuples(const PGresult *res) { return feedsync_PQntuples(res); }
int PQisBusy(PGconn *conn) { return feedsync_PQisBusy(conn); }
int PQputCopyData(PGconn *conn, const char *buffer, int nbytes) { return feedsync_PQputCopyData(conn, buffer, nbytes); }
int PQputCopyEnd(PGconn *conn, const char *errormsg) { return feedsync_PQputCopyEnd(conn, errormsg); }
char *PQresultErrorField(const PGresult *res, int fieldcode) { return feedsync_PQresultErrorField(res, fieldcode); }
char *PQresultErrorMessage(const PGresult *res) { return feedsync_PQresultErrorMessage(res); }
ExecStatusType PQresultStatus(const PGresult *res) { return feedsync_PQresultStatus(res); }
int PQsendPrepare(PGconn *conn, const char *stmtName, const char *query, int nParams, const Oid *paramTypes) {
    return feedsync_PQsendPrepare(conn, stmtName, query, nParams, paramTypes);
}
int PQsendQuery(PGconn *conn, const char *query) { return feedsync_PQsendQuery(conn, query); }
int PQsendQueryParams(
    PGconn *conn, const char *command, int nParams, const Oid *paramTypes, const char *const *paramValues,
    const int *paramLengths, const int *paramFormats, int resultFormat) {
    return feedsync_PQsendQueryParams(
        conn, command, nParams, paramTypes, paramValues, paramLengths, paramFormats, resultFormat);
}
int PQsendQueryPrepared(
    PGconn *conn, const char *stmtName, int nParams, const char *const *paramValues, const int *paramLengths,
    const int *paramFormats, int resultFormat) {
    return feedsync_PQsendQueryPrepared(conn, stmtName, nParams, paramValues, paramLengths, paramFormats, resultFormat);
}
PQnoticeReceiver PQsetNoticeReceiver(PGconn *conn, PQnoticeReceiver proc, void *arg) {
    return feedsync_PQsetNoticeReceiver(conn, proc, arg);
}
int PQsocket(const PGconn *conn) { return feedsync_PQsocket(conn); }
ConnStatusType PQstatus(const PGconn *conn) { return feedsync_PQstatus(conn); }
PGTransactionStatusType PQtransactionStatus(const PGconn *conn) { return feedsync_PQtransactionStatus(conn); }
