#ifndef FEEDSYNC_CLIBPQ_SHIM_H
#define FEEDSYNC_CLIBPQ_SHIM_H

// The PostgreSQL client library's declarations: Fedora puts libpq-fe.h in /usr/include, Debian and Ubuntu in
// /usr/include/postgresql. The module does not link libpq: CLibPQLoader defines the functions FeedSync calls and
// loads libpq with dlopen(3) the first time FeedSync talks to PostgreSQL.
#if __has_include(<libpq-fe.h>)
#include <libpq-fe.h>
#elif __has_include(<postgresql/libpq-fe.h>)
#include <postgresql/libpq-fe.h>
#else
#error "libpq-fe.h not found: install libpq's development files (Debian and Ubuntu: apt-get install libpq-dev)"
#endif

#endif
