#!/usr/bin/env bash
# Throwaway PostgreSQL server for the test suite (used by .ci/run; usable by hand).
#
# Usage:
#   url=$(.ci/postgres-server.sh start DIR)   # DIR must not exist or be empty
#   export FEEDSYNC_TEST_POSTGRES_URL=$url
#   ...
#   .ci/postgres-server.sh restart DIR [SECS] # crash-restarts it (for fault tests); same port and password
#   .ci/postgres-server.sh stop DIR           # stops the server and removes DIR
#   port=$(.ci/postgres-server.sh standby DIR PRIMARY_DIR)  # a streaming standby of the server in PRIMARY_DIR
#   port=$(.ci/postgres-server.sh standby DIR PRIMARY_DIR sync)  # the same, replicating synchronously
#   .ci/postgres-server.sh halt DIR           # the machine dies: immediate stop, DIR kept (for failover tests)
#   .ci/postgres-server.sh kill DIR           # the postmaster dies: SIGKILL, DIR kept (for failover tests)
#   .ci/postgres-server.sh promote DIR        # the standby in DIR becomes a primary
#   .ci/postgres-server.sh resume DIR PORT    # starts a halted server again on PORT, as it was
#
# start creates a new cluster in DIR/data (initdb, UTF8, locale C), starts it and waits until it accepts
# connections (pg_isready, at most 30 s; the server log tail is printed on failure). It creates:
#   - role `feedsync` with LOGIN and CREATEDB (tests create one database per test) and a random password;
#   - database `feedsync`, owned by that role.
# It prints exactly one line on stdout, postgresql://feedsync:PASSWORD@127.0.0.1:PORT/feedsync, for the caller to
# capture, and the server version, port and directory on stderr (never the password).
# Settings: PostgreSQL's defaults (fsync and synchronous_commit stay on) plus max_connections=400 (the test suites run in
# parallel, each test on a database of its own) and client_connection_check_interval=1s (a killed client's session ends
# within a second even while it waits for a lock, instead of when its statement ends).
#
# Security: the server listens on 127.0.0.1 only (on a free port picked at run time) and on a unix socket inside
# DIR (mode 0700). TCP connections need a password (scram-sha-256); the bootstrap superuser has no password, so it
# can only connect through the socket with peer authentication. The password is generated per run, is never
# written to a command line (it reaches psql on stdin) and is never logged by this script. Everything lives in
# DIR and is deleted by `stop`: nothing here is meant to outlive one CI run.
#
# initdb and postgres refuse to run as root, so as root they run as the `postgres` system user
# (runuser -u postgres --); DIR's parent must then be searchable by that user (e.g. a `mktemp -d` with chmod 755).
# The binaries are the newest /usr/lib/postgresql/*/bin, or PG_BIN if set, or initdb's directory on PATH.
# `restart` stops the server with `pg_ctl restart -m immediate` — every backend is killed at once, no checkpoint,
# as after a crash — and starts it again with the same settings and port, then waits (at most 30 s) until it
# accepts connections; it prints nothing on stdout and never the password. Tests use it for server-restart faults.
# With SECS, the server stays down that many seconds between the immediate stop and the start (a crash whose
# recovery waits), so that clients started meanwhile surely find it down.
# `stop` only deletes a DIR that `start` or `standby` made (it holds the marker file .feedsync-postgres) or an empty
# one.
# `standby` copies the running server in PRIMARY_DIR with pg_basebackup (as the bootstrap superuser, through its
# socket) into DIR, configured to stream from it (asynchronously), starts it on a free port of 127.0.0.1 and waits until it
# accepts connections; it prints the port on stdout. The role, its password and the databases are the primary's: the
# caller's URL works with the port replaced. With `sync`, the standby connects with an application_name made from
# DIR's name (lower case, [a-z0-9_]), and the primary is set (`ALTER SYSTEM` as the bootstrap superuser through its
# socket, then `pg_reload_conf()`) to `synchronous_standby_names` = that name and `synchronous_commit = on`: a commit
# on the primary returns only once the standby has flushed it. The script waits (at most 30 s) until
# pg_stat_replication shows the standby as `sync`. The setting is made after the copy, so the standby does not have
# it: once promoted, it commits without waiting for a standby of its own.
# `halt` stops a server as if its machine died (`pg_ctl stop -m immediate`) and keeps DIR; `kill` sends SIGKILL to
# its postmaster (the pid on the first line of DIR/data/postmaster.pid, checked to be this cluster's) and waits (at
# most 10 s) until it is gone: its backends are left to notice on their own, as after a crash, and DIR is kept (`stop`
# still removes it); `promote` ends the standby's recovery (`pg_ctl promote -w`), so it accepts writes.
# `resume` starts a halted server again on PORT (the one it had: a standby resumes as a standby) and waits until it
# accepts connections.
set +x # never trace: the URL carries the password
set -euo pipefail

me=postgres-server.sh
die() { echo "$me: $*" >&2; exit 1; }
usage() {
    echo "usage: $0 start DIR | restart DIR [SECS] | stop DIR | standby DIR PRIMARY_DIR [sync] | halt DIR | kill DIR | promote DIR | resume DIR PORT" >&2
    exit 2
}
[ $# -eq 2 ] || { [ $# -eq 3 ] && [ "$1" = restart ] && [[ $3 =~ ^[0-9]+$ ]]; } || { [ $# -eq 3 ] && [ "$1" = standby ]; } ||
    { [ $# -eq 4 ] && [ "$1" = standby ] && [ "$4" = sync ]; } ||
    { [ $# -eq 3 ] && [ "$1" = resume ] && [[ $3 =~ ^[0-9]+$ ]]; } ||
    usage
down=${3:-}
synchronous=${4:-}
command=$1
dir=$(realpath -m -- "$2")
marker="$dir/.feedsync-postgres"

# --- Binaries --------------------------------------------------------------------------------------------------
find_bin() {
    if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
    local newest
    newest=$(printf '%s\n' /usr/lib/postgresql/*/bin/initdb 2>/dev/null | grep -v '\*' | sort -V | tail -n 1 || true)
    if [ -n "$newest" ]; then dirname "$newest"; return; fi
    if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return; fi
    die "no PostgreSQL server binaries (install the postgresql package, or set PG_BIN to the directory holding initdb)"
}
bin=$(find_bin)

# --- Who runs the server ---------------------------------------------------------------------------------------
if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || die "running as root, but there is no 'postgres' system user to run the server as"
    command -v runuser >/dev/null 2>&1 || die "running as root, but runuser is missing"
    owner=postgres
    as_server() { runuser -u postgres -- "$@"; }
else
    owner=$(id -un)
    as_server() { "$@"; }
fi
cd / # the server user may not be allowed into the caller's working directory

# --- stop ------------------------------------------------------------------------------------------------------
stop_server() {
    [ -e "$dir" ] || return 0
    [ -d "$dir" ] || die "$dir is not a directory; not removing it"
    if [ ! -f "$marker" ]; then
        [ -z "$(ls -A "$dir")" ] || die "$dir was not made by '$me start' (no .feedsync-postgres); not removing it"
        rmdir "$dir"
        return 0
    fi
    if [ -f "$dir/data/postmaster.pid" ]; then
        if ! as_server "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1; then
            echo "$me: fast shutdown failed; trying immediate" >&2
            as_server "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
        fi
        # pg_ctl fails if the postmaster died without cleaning up; make sure nothing of this cluster is left.
        local pid
        pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
        if [[ $pid =~ ^[0-9]+$ ]] && [ -r "/proc/$pid/cmdline" ] &&
            tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir/data"; then
            echo "$me: postmaster $pid is still running; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -rf -- "$dir"
    echo "$me: stopped the server and removed $dir" >&2
}

# --- start -----------------------------------------------------------------------------------------------------
# A port on 127.0.0.1 that nothing listens on right now (the kernel's pick, else a scan of a high range).
free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])' && return
    fi
    local port
    for port in $(shuf -i 20000-60999 -n 200 2>/dev/null || seq 25432 25631); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return; fi
    done
    die "found no free port on 127.0.0.1"
}

# Starts the cluster in DIR/data on a free port of 127.0.0.1 and waits (at most 30 s) until it accepts connections;
# prints the port. The port is free when we look, but another process may take it before the server binds: retried.
start_on_free_port() {
    local port attempt started=0
    for attempt in 1 2 3 4 5; do
        port=$(free_port)
        if as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "-p $port" -w -t 30 start >/dev/null 2>&1; then
            started=1
            break
        fi
        grep -qE 'could not (bind|create listen socket)|Address already in use' "$dir/server.log" 2>/dev/null || break
        echo "$me: port $port was taken (attempt $attempt of 5)" >&2
        as_server "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    done
    [ $started -eq 1 ] || die "the server did not start"
    local ready=0
    for _ in $(seq 1 60); do
        if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 1; then ready=1; break; fi
        sleep 0.5
    done
    [ $ready -eq 1 ] || die "the server did not accept connections on 127.0.0.1:$port within 30 s"
    echo "$port"
}

start_server() {
    for b in initdb pg_ctl pg_isready psql postgres; do
        [ -x "$bin/$b" ] || die "$bin/$b not found (install the postgresql package, or set PG_BIN)"
    done
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then die "$dir exists and is not empty"; fi
    # The socket is DIR/.s.PGSQL.PORT and must fit in sun_path (107 bytes).
    [ ${#dir} -le 95 ] || die "$dir is too long for a unix socket path (at most 95 bytes)"

    mkdir -p -- "$dir"
    : >"$marker"
    chown "$owner": "$dir" "$marker"
    chmod 700 "$dir"
    # From here on, any failure stops whatever was started and removes DIR.
    trap cleanup_failed_start EXIT
    as_server test -w "$dir" || die "user $owner cannot write $dir (is a parent directory not searchable by $owner?)"

    local out
    if ! out=$(as_server "$bin/initdb" -D "$dir/data" --encoding=UTF8 --locale=C \
        --auth-local=peer --auth-host=scram-sha-256 2>&1); then
        echo "$out" >&2
        die "initdb failed"
    fi
    # The feedsync role may also come in through the socket, with its password (the tests of socket URLs); every
    # other local role keeps peer authentication. pg_hba.conf is read top down, so the line goes first.
    { echo "local   all   feedsync   scram-sha-256"; cat "$dir/data/pg_hba.conf"; } >"$dir/pg_hba.tmp" &&
        as_server cp "$dir/pg_hba.tmp" "$dir/data/pg_hba.conf" && rm -f "$dir/pg_hba.tmp" ||
        die "could not write pg_hba.conf"
    cat >>"$dir/data/postgresql.conf" <<EOF

# --- $me: everything else is PostgreSQL's default (fsync stays on) ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
unix_socket_permissions = 0700
max_connections = 400
client_connection_check_interval = '1s'
password_encryption = 'scram-sha-256'
EOF

    local port
    port=$(start_on_free_port)

    local password
    password=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
    [ ${#password} -eq 48 ] || die "could not generate a password"
    # The bootstrap superuser (named after the server user) connects through the socket with peer auth. The SQL,
    # password included, goes on stdin so it never shows in a process list.
    printf "CREATE ROLE feedsync LOGIN CREATEDB PASSWORD '%s';\nCREATE DATABASE feedsync OWNER feedsync;\n" "$password" |
        as_server "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -d postgres -f - >/dev/null ||
        die "could not create the feedsync role and database"

    # Check the URL's way in (TCP, password) without putting the password on psql's command line.
    local version
    version=$(PGPASSWORD=$password PGCONNECT_TIMEOUT=10 "$bin/psql" -X -A -t -v ON_ERROR_STOP=1 \
        -h 127.0.0.1 -p "$port" -U feedsync -d feedsync -c 'SHOW server_version') ||
        die "could not connect as feedsync over TCP"
    local url="postgresql://feedsync:$password@127.0.0.1:$port/feedsync"
    echo "$me: PostgreSQL $version on 127.0.0.1:$port (role and database feedsync; data and log in $dir)" >&2
    trap - EXIT
    printf '%s\n' "$url"
}

# --- restart ---------------------------------------------------------------------------------------------------
restart_server() {
    [ -f "$marker" ] || die "$dir was not made by '$me start' (no .feedsync-postgres)"
    [ -f "$dir/data/postmaster.pid" ] || die "no server is running in $dir"
    # The port is the one the server was started with (line 4 of postmaster.pid); pg_ctl restart reuses the options.
    local port
    port=$(sed -n 4p "$dir/data/postmaster.pid")
    [[ $port =~ ^[0-9]+$ ]] || die "cannot read the server's port from $dir/data/postmaster.pid"
    if [ -n "$down" ]; then
        if ! as_server "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1; then
            show_log
            die "pg_ctl stop failed"
        fi
        sleep "$down"
        if ! as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "-p $port" -w -t 30 start >/dev/null 2>&1; then
            show_log
            die "pg_ctl start failed"
        fi
    elif ! as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -m immediate -w -t 30 restart >/dev/null 2>&1; then
        show_log
        die "pg_ctl restart failed"
    fi
    local _
    for _ in $(seq 1 60); do
        if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 1; then
            echo "$me: restarted the server on 127.0.0.1:$port (immediate shutdown, crash recovery)" >&2
            return 0
        fi
        sleep 0.5
    done
    show_log
    die "the server did not accept connections on 127.0.0.1:$port within 30 s of the restart"
}

# --- standby, halt, promote -----------------------------------------------------------------------------------
standby_server() {
    local primary
    primary=$(realpath -m -- "$down")
    [ -f "$primary/.feedsync-postgres" ] || die "$primary was not made by '$me start'"
    local primary_port
    primary_port=$(sed -n 4p "$primary/data/postmaster.pid" 2>/dev/null || true)
    [[ $primary_port =~ ^[0-9]+$ ]] || die "no server is running in $primary"
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then die "$dir exists and is not empty"; fi
    [ ${#dir} -le 95 ] || die "$dir is too long for a unix socket path (at most 95 bytes)"
    mkdir -p -- "$dir"
    : >"$marker"
    chown "$owner": "$dir" "$marker"
    chmod 700 "$dir"
    trap cleanup_failed_start EXIT
    # A synchronous standby is named by its application_name, which -R writes into primary_conninfo.
    local name="" connection=()
    if [ -n "$synchronous" ]; then
        name=$(basename -- "$dir" | tr '[:upper:]' '[:lower:]' | tr -c 'a-z0-9_\n' '_')
        connection=(-d "application_name=$name")
    fi
    local out
    if ! out=$(as_server "$bin/pg_basebackup" "${connection[@]}" -h "$primary" -p "$primary_port" -D "$dir/data" -R -X stream -c fast 2>&1); then
        echo "$out" >&2
        die "pg_basebackup failed"
    fi
    if [ -n "$name" ] && ! grep -q "application_name=$name" "$dir/data/postgresql.auto.conf"; then
        die "pg_basebackup -R did not write application_name=$name into primary_conninfo"
    fi
    # Later lines win: the standby's own socket directory; the port comes with pg_ctl -o.
    printf "\n# --- %s: a standby of %s ---\nunix_socket_directories = '%s'\n" "$me" "$primary" "$dir" |
        as_server tee -a "$dir/data/postgresql.conf" >/dev/null
    local port
    port=$(start_on_free_port)
    if [ -n "$name" ]; then make_synchronous "$primary" "$primary_port" "$name"; fi
    echo "$me: a streaming${name:+ synchronous} standby of $primary on 127.0.0.1:$port (data and log in $dir)" >&2
    trap - EXIT
    printf '%s\n' "$port"
}

# Makes the standby named NAME the synchronous one of the primary in PRIMARY_DIR (on PRIMARY_PORT) and waits until
# the primary reports it as such.
make_synchronous() {
    local primary=$1 primary_port=$2 name=$3
    printf "ALTER SYSTEM SET synchronous_standby_names = '%s';\nALTER SYSTEM SET synchronous_commit = on;\nSELECT pg_reload_conf();\n" \
        "$name" | as_server "$bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$primary" -p "$primary_port" -d postgres -f - >/dev/null ||
        die "could not make $name the primary's synchronous standby"
    local state="" _
    for _ in $(seq 1 60); do
        state=$(as_server "$bin/psql" -X -A -t -h "$primary" -p "$primary_port" -d postgres \
            -c "SELECT sync_state FROM pg_stat_replication WHERE application_name = '$name'" 2>/dev/null || true)
        [ "$state" = sync ] && return 0
        sleep 0.5
    done
    die "the primary did not report $name as a synchronous standby within 30 s (sync_state: ${state:-none})"
}

halt_server() {
    [ -f "$marker" ] || die "$dir was not made by '$me'"
    as_server "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null 2>&1 || die "pg_ctl stop failed"
    echo "$me: halted the server in $dir (immediate stop; its data is kept)" >&2
}

kill_server() {
    [ -f "$marker" ] || die "$dir was not made by '$me'"
    local pid
    pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] || die "no server is running in $dir"
    # Only this cluster's postmaster: a stale pid file may name another process by now.
    [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir/data" ||
        die "process $pid is not the postmaster of $dir"
    kill -KILL "$pid" || die "could not kill process $pid"
    local _
    for _ in $(seq 1 100); do
        # Gone, or a zombie that its parent has not reaped yet: either way it serves nothing.
        if [ ! -e "/proc/$pid" ] || [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ]; then
            echo "$me: killed the postmaster of $dir (SIGKILL; its data is kept)" >&2
            return 0
        fi
        sleep 0.1
    done
    die "process $pid was still running 10 s after SIGKILL"
}

promote_server() {
    [ -f "$marker" ] || die "$dir was not made by '$me'"
    as_server "$bin/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null 2>&1 || { show_log; die "pg_ctl promote failed"; }
    echo "$me: promoted the standby in $dir" >&2
}

resume_server() {
    [ -f "$marker" ] || die "$dir was not made by '$me'"
    [ ! -f "$dir/data/postmaster.pid" ] || die "a server is running in $dir"
    if ! as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "-p $down" -w -t 30 start >/dev/null 2>&1; then
        show_log
        die "pg_ctl start failed"
    fi
    echo "$me: resumed the server in $dir on 127.0.0.1:$down" >&2
}

cleanup_failed_start() {
    local status=$?
    if [ "$status" -ne 0 ]; then
        show_log
        stop_server || true
    fi
}

show_log() {
    if [ -s "$dir/server.log" ]; then
        echo "--- $me: last lines of $dir/server.log ---" >&2
        tail -n 30 "$dir/server.log" >&2 || true
    fi
}

case $command in
    start) start_server ;;
    restart) restart_server ;;
    stop) stop_server ;;
    standby) standby_server ;;
    halt) halt_server ;;
    kill) kill_server ;;
    promote) promote_server ;;
    resume) resume_server ;;
    *) usage ;;
esac
