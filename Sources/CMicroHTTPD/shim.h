// GNU libmicrohttpd's API (apt `libmicrohttpd-dev`, pkg-config `libmicrohttpd`): the HTTP server behind
// `feedsync serve`. microhttpd.h needs the socket and integer types declared first.
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

// MHD_get_daemon_info is variadic, which Swift cannot call: the port the daemon is bound to (the one it picked when
// asked for port 0), or 0 when libmicrohttpd cannot tell.
static inline uint16_t feedsync_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}
