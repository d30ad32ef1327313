#ifndef FEEDSYNC_CLIBPQ_SHIM_H
#define FEEDSYNC_CLIBPQ_SHIM_H

// The PostgreSQL client library. pkg-config (`libpq`) supplies the include path, for example
// /usr/include/postgresql on Debian.
#include <libpq-fe.h>

#endif
