#ifndef FEEDSYNC_CLIBPQ_LOADER_H
#define FEEDSYNC_CLIBPQ_LOADER_H

#include <stddef.h>

/// Loads PostgreSQL's client library (libpq) the first time it is called, from the environment variable
/// FEEDSYNC_LIBPQ when it is set (a file name or path) and from the system's `libpq.so.5` otherwise, and resolves
/// every libpq function FeedSync calls. Thread-safe; later calls return the first call's outcome at once.
///
/// Returns 1 when libpq is ready. Returns 0 when it could not be loaded and writes a one-line reason with its fix
/// (the dynamic loader's message or the missing function, and how to install or name a libpq; or that a fully static
/// program cannot load it) into `reason` (NUL-terminated, cut to `capacity` bytes); `reason` may be NULL.
int feedsync_libpq_load(char *reason, size_t capacity);

/// Returns 1 when this program can load shared libraries such as libpq at all (it has a dynamic loader), 0 when it is
/// a fully static executable, which `feedsync_libpq_load` refuses. Loads nothing.
int feedsync_libpq_loadable(void);

#endif
