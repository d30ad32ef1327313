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

// MHD_get_connection_info and MHD_set_connection_option are variadic too.

// The connection's socket, or -1.
static inline int feedsync_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : (int)info->connect_fd;
}

// The client's address (AF_INET or AF_INET6), or NULL.
static inline const struct sockaddr *feedsync_mhd_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

// Sets the connection's inactivity timeout (seconds; 0 for none). Only from a callback about that connection.
static inline void feedsync_mhd_set_timeout(struct MHD_Connection *connection, unsigned int seconds) {
    (void)MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

// The pointer the connection notification stored for the connection (MHD_OPTION_NOTIFY_CONNECTION), or NULL.
static inline void *feedsync_mhd_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}
