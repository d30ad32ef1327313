// GNU libmicrohttpd's API (apt `libmicrohttpd-dev`, pkg-config `libmicrohttpd`): the HTTP server behind
// `feedsync serve`. microhttpd.h needs the socket and integer types declared first.
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>
