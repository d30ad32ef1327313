#ifndef FEEDSYNC_CSQLITE_SHIM_H
#define FEEDSYNC_CSQLITE_SHIM_H

#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro that casts -1 to a function pointer; Swift cannot import it.
// https://www.sqlite.org/c3ref/c_static.html
static inline sqlite3_destructor_type feedsync_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

#endif
