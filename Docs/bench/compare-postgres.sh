#!/usr/bin/env bash
# FeedSync on PostgreSQL against PostgreSQL's own benchmark tool: pgbench running the W1 toggle and
# the W2 page query (Docs/bench/pgbench/*.sql on ../shared/peers/postgres's schema and seed) and feedsync-bench's
# W1 (1, 4, 16 clients), the hot post, W2, W4, W6, W7 with --db, all on ONE throwaway server
# (.ci/postgres-server.sh), interleaved A B A B; prints the medians and the ratios ours ÷ pgbench.
#
# usage: Docs/bench/compare-postgres.sh [ROUNDS]     (default 3 rounds; ~5 min a round on 2 cores)
#        QUICK=1 Docs/bench/compare-postgres.sh 1    (small sizes, a smoke run of a minute or two)
#        SKIP_BUILD=1 OURS_BIN=path/to/feedsync-bench Docs/bench/compare-postgres.sh 3 > table.md
#
# Cases (each round, in this order; pgbench first, then ours):
#   w1 C    pgbench toggle.sql -c C (spread: users 1..1000, posts 1..10000)  |  feedsync-bench w1 --clients C
#   hot C   pgbench toggle.sql -c C -D posts=1 (one post)                      |  feedsync-bench w1 --clients C --hot-post
#   w2      pgbench page.sql -c 1 (100,000 posts, 1,000,000 likes)             |  feedsync-bench w2
#           then pgbench feed-page.sql (FeedSync's own statement) on the database that W2 ran on
#   w2long  the same pgbench run                                              |  feedsync-bench w2 --queries 20000
#           (W2's 2,000 pages take ~0.35 s on a new connection right after the seed, cold caches included;
#           pgbench's page runs PGBENCH_SECONDS. 20,000 pages run about as long as pgbench: the steady rates.)
#   w4, w6  feedsync-bench only (W4 is read against pgbench toggle at 1 client)
#   w7      feedsync-bench w7 --threads T --writer group and --writer mutex (calls serialised: no group commit)
#
# What bounds the figures (Docs/bench/README.md, "What bounds a figure"): once per call, pg_test_fsync -s 1 on the
# server's disk is recorded as a line {"workload":"bounds","impl":"pg_test_fsync",...}; around every pgbench run the
# server's CPU per transaction (the postmaster's reaped children: pgbench's backends, which exit with it) and the
# WAL per transaction (bytes from the WAL position, records and syncs from pg_stat_wal) are added to its line;
# feedsync-bench records its own (server CPU, WAL, round trips, client CPU, lone commit). A second table prints them.
#
# Environment:
#   WORKLOADS      cases to run (default "w1 hot w2 w2long w4 w6 w7")
#   CLIENTS        W1 client counts (default "1 4 16"); HOT_CLIENTS (default 16); W7_THREADS (default 16)
#   PGBENCH_SECONDS  seconds per pgbench run (default 8); W2_LONG_QUERIES  pages of the w2long case (default 20000)
#   W1_ARGS, W2_ARGS, W4_ARGS, W6_ARGS, W7_ARGS  extra flags for feedsync-bench
#   RESULTS        the JSON lines file (default: a temporary file, path printed at the end); appended to
#   SKIP_BUILD=1   use OURS_BIN (default .build-bench/release/feedsync-bench) without building it
#   BENCH_SCRATCH  the build directory (default .build-bench); PEERS_PG_DIR (default ../shared/peers/postgres)
#   SERVER_PARENT  where the throwaway server's data directory is made (default /tmp). SERVER_PARENT=/dev/shm puts
#                  it on tmpfs: fsync then costs next to nothing (a machine with fast storage), and every JSON line
#                  says so ("storage":"tmpfs"); otherwise "storage" is the file system type of SERVER_PARENT
# The server's password never reaches a command line or the output: it is exported as PGPASSWORD, and every tool
# gets the URL without it. Exit status 1 when any run failed its checks.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/Docs/bench/pgbench
rounds=${1:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [ROUNDS]" >&2; exit 2; }
peers_pg=${PEERS_PG_DIR:-$root/../shared/peers/postgres}
workloads=${WORKLOADS:-"w1 hot w2 w2long w4 w6 w7"}
clients_list=${CLIENTS:-"1 4 16"}
hot_clients=${HOT_CLIENTS:-16}
w7_threads=${W7_THREADS:-16}
secs=${PGBENCH_SECONDS:-8}
results=${RESULTS:-$(mktemp /tmp/feedsync-compare-postgres.XXXXXX.jsonl)}

w2_posts=100000 w2_users=10000 w2_likes=1000000 w2_long_queries=${W2_LONG_QUERIES:-20000}
if [ "${QUICK:-0}" = 1 ]; then
    secs=${PGBENCH_SECONDS:-3}
    w2_posts=10000 w2_users=1000 w2_likes=50000 w2_long_queries=${W2_LONG_QUERIES:-2000}
    : "${W1_ARGS:=--ops 2000}"
    : "${W2_ARGS:=--posts $w2_posts --users $w2_users --likes $w2_likes --queries 500}"
    : "${W4_ARGS:=--ops 2000}"
    : "${W6_ARGS:=--events 20000}"
    : "${W7_ARGS:=--ops 2000}"
else
    # Sizes for PostgreSQL, where a toggle costs a WAL flush: 10,000 ops (20,000 at one client take a minute),
    # a log of 200,000 events (building 1,000,000 through perform takes minutes).
    : "${W1_ARGS:=--ops 10000}"
    : "${W4_ARGS:=--ops 5000}"
    : "${W6_ARGS:=--events 200000}"
    : "${W7_ARGS:=--ops 10000}"
fi
W1_ARGS=${W1_ARGS:-}; W2_ARGS=${W2_ARGS:-}; W4_ARGS=${W4_ARGS:-}; W6_ARGS=${W6_ARGS:-}; W7_ARGS=${W7_ARGS:-}

for c in psql pgbench python3; do
    command -v "$c" > /dev/null || { echo "$c not found on PATH" >&2; exit 2; }
done
for f in "$peers_pg/schema.sql" "$peers_pg/seed.sql" "$here/toggle.sql" "$here/page.sql"; do
    [ -f "$f" ] || { echo "missing $f" >&2; exit 2; }
done

bench_scratch=${BENCH_SCRATCH:-$root/.build-bench}
ours=${OURS_BIN:-$bench_scratch/release/feedsync-bench}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    echo "building feedsync-bench (release)" >&2
    (cd "$root" && swift build -c release --scratch-path "$bench_scratch" --product feedsync-bench >&2) || exit 2
fi
[ -x "$ours" ] || { echo "no feedsync-bench at $ours" >&2; exit 2; }

tmp=$(mktemp -d "${SERVER_PARENT:-/tmp}/feedsync-pg-compare.XXXXXX") || exit 2
storage=$(stat -f -c %T "$tmp")
chmod 755 "$tmp" # the server may run as the postgres user, which must reach $tmp/server
cleanup() {
    trap - EXIT INT TERM
    bash "$root/.ci/postgres-server.sh" stop "$tmp/server" > /dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

url=$(bash "$root/.ci/postgres-server.sh" start "$tmp/server") || exit 2
# postgresql://feedsync:PASSWORD@127.0.0.1:PORT/feedsync → PGPASSWORD and the URL without it.
userinfo=${url#postgresql://}
userinfo=${userinfo%%@*}
PGPASSWORD=${userinfo#*:}
export PGPASSWORD
hostpath=${url#*@}
server="postgresql://feedsync@${hostpath%%/*}"
unset url userinfo
db_url="$server/feedsync"
echo "server $server; $(nproc) CPUs; $secs s per pgbench run; results to $results" >&2
pg_bin=${PG_BIN:-$(dirname "$(printf '%s\n' /usr/lib/postgresql/*/bin/pg_test_fsync | sort -V | tail -n 1)")}

q() { psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

# The pgbench databases: pgb_w1 (10,000 posts, 1,000 users, no likes) and pgb_w2 (the W2 sizes).
q "$db_url" -c "CREATE DATABASE pgb_w1" -c "CREATE DATABASE pgb_w2" || exit 2
q "$server/pgb_w1" -f "$peers_pg/schema.sql" || exit 2
q "$server/pgb_w2" -f "$peers_pg/schema.sql" || exit 2
echo "seeding pgb_w2 ($w2_posts posts, $w2_likes likes)" >&2
q "$server/pgb_w2" -v posts=$w2_posts -v users=$w2_users -v likes=$w2_likes -f "$peers_pg/seed.sql" || exit 2

status=0
# The disk's flush: pg_test_fsync's one-8kB-write figures for fdatasync (Linux's default wal_sync_method) and
# open_datasync, on the server's data disk (as the server's user, who may write there).
fsync_bounds() {
    local out as_server=()
    [ "$(id -u)" -ne 0 ] || as_server=(runuser -u postgres --)
    out=$("${as_server[@]}" "$pg_bin/pg_test_fsync" -s 1 -f "$tmp/server/fsync.test" 2> /dev/null)
    rm -f "$tmp/server/fsync.test"
    echo "$out" | python3 -c '
import json, re, sys
line = {"workload": "bounds", "impl": "pg_test_fsync", "backend": "postgresql"}
text = sys.stdin.read().split("two 8kB writes")[0]
for method in ("fdatasync", "open_datasync"):
    m = re.search(r"^\s*" + method + r"\s+([0-9.]+) ops/sec\s+([0-9]+) usecs/op", text, re.M)
    line[method + "_ops_per_s"] = float(m.group(1)) if m else None
    line[method + "_us"] = int(m.group(2)) if m else None
line["ok"] = line["fdatasync_us"] is not None
print(json.dumps(line, separators=(",", ":")))'
}

# The postmaster's reaped children's CPU time (cutime + cstime of /proc/<postmaster>/stat) in clock ticks: every
# backend that exited so far, pgbench's included once it ended.
postmaster_ticks() {
    local pid
    pid=$(head -n 1 "$tmp/server/data/postmaster.pid" 2> /dev/null) || return
    sed 's/^.*) //' "/proc/$pid/stat" 2> /dev/null | awk '{ print $14 + $15 }'
}
# The WAL position in bytes, and pg_stat_wal's records and syncs: "bytes records syncs".
wal_sample() {
    q "$db_url" -F ' ' -c "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint, wal_records, wal_sync FROM pg_stat_wal"
}

# record LINE: appends a JSON line to $results (a missing line is a failure).
record() {
    if [ -n "$1" ]; then echo "{\"storage\":\"$storage\",${1#\{}" >> "$results"; else echo "    (no output)" >&2; status=1; fi
}

# ours ARGS...: one feedsync-bench run on a fresh database of the server.
ours() {
    echo "  feedsync-bench $*" >&2
    local line
    line=$("$ours" "$@" --db "$db_url") || status=1
    record "$line"
}

# ours_then_pgbench ARGS...: one feedsync-bench run whose database is kept, then pgbench running FeedSync's own page
# statement (feed-page.sql) on it: the same server, data and statement, without the client library. The database is
# dropped afterwards.
ours_then_pgbench() {
    echo "  feedsync-bench $* --keep, then pgbench feed-page.sql on its database" >&2
    local line kept
    line=$("$ours" "$@" --db "$db_url" --keep 2> "$tmp/ours.err") || status=1
    record "$line"
    kept=$(sed -n 's/^.*kept database \(feedsync_bench_[0-9a-f]*\) .*$/\1/p' "$tmp/ours.err")
    if [ -z "$kept" ]; then echo "    (no kept database)" >&2; status=1; return; fi
    pgb pg-page-ours 1 feed-page.sql "$kept" -D users=$w2_users -D posts=$w2_posts
    q "$db_url" -c "DROP DATABASE $kept" || status=1
}

# Resets pgb_w1 to 10,000 posts and no likes or events (like and event tables left un-analyzed, as seed.sql says).
reset_w1() {
    q "$server/pgb_w1" -c "TRUNCATE posts, likes, events RESTART IDENTITY" &&
        q "$server/pgb_w1" -v posts=10000 -v users=1000 -v likes=0 -f "$peers_pg/seed.sql"
}

# pgb WORKLOAD CLIENTS SCRIPT DB [-D ...]: one pgbench run; for the toggle, checks the database afterwards
# (sum(like_count) = likes, every post's count equals its likes, one event per transaction).
pgb() {
    local workload=$1 clients=$2 script=$3 db=$4 rc=0
    shift 4
    local threads=$((clients < 2 ? 1 : 2))
    echo "  pgbench $workload -c $clients $*" >&2
    [ "$script" != toggle.sql ] || reset_w1 || status=1
    # What the server did for the run: WAL sampled outside the CPU span (psql's own backends are reaped too).
    local wal_before wal_after ticks_before ticks_after
    wal_before=$(wal_sample)
    sleep 0.2
    ticks_before=$(postmaster_ticks)
    pgbench -n -M prepared -j "$threads" -c "$clients" -T "$secs" "$@" -f "$here/$script" "$server/$db" \
        > "$tmp/pgbench.out" 2> "$tmp/pgbench.err" || rc=$?
    sleep 0.3 # pgbench's backends exit (publishing their WAL statistics) and are reaped
    ticks_after=$(postmaster_ticks)
    wal_after=$(wal_sample)
    local tps lat txns failed ok=true
    tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$tmp/pgbench.out")
    lat=$(sed -n 's/^latency average = \([0-9.]*\) ms$/\1/p' "$tmp/pgbench.out")
    txns=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$tmp/pgbench.out")
    failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$tmp/pgbench.out")
    if [ "$rc" -ne 0 ] || [ -z "$tps" ] || [ -z "$txns" ] || [ "${failed:-1}" -ne 0 ]; then
        ok=false
        tail -n 5 "$tmp/pgbench.err" "$tmp/pgbench.out" >&2
    fi
    local extra=""
    if [ "$script" = toggle.sql ] && [ "$ok" = true ]; then
        local total likes events bad
        read -r total likes events bad < <(q "$server/$db" -F ' ' -c "
            SELECT (SELECT coalesce(sum(like_count), 0) FROM posts), (SELECT count(*) FROM likes),
                   (SELECT count(*) FROM events),
                   (SELECT count(*) FROM posts p WHERE like_count <> (SELECT count(*) FROM likes l WHERE l.post_id = p.id))")
        [ "$total" = "$likes" ] && [ "$events" = "$txns" ] && [ "$bad" = 0 ] || ok=false
        extra=",\"like_count_total\":$total,\"likes\":$likes,\"events\":$events"
    fi
    [ "$ok" = true ] || status=1
    if [ "${txns:-0}" -gt 0 ]; then
        extra+=$(python3 -c '
import json, os, sys
txns, tb, ta = int(sys.argv[1]), sys.argv[2], sys.argv[3]
wb, wa = [int(x) for x in sys.argv[4].split()], [int(x) for x in sys.argv[5].split()]
keys = {"server_cpu_us_per_op": None if not tb or not ta else
        round((int(ta) - int(tb)) / os.sysconf("SC_CLK_TCK") * 1e6 / txns, 1),
        "wal_bytes_per_op": round((wa[0] - wb[0]) / txns, 1), "wal_records_per_op": round((wa[1] - wb[1]) / txns, 2),
        "wal_syncs_per_op": round((wa[2] - wb[2]) / txns, 3)}
print("," + json.dumps(keys, separators=(",", ":"))[1:-1])' \
            "$txns" "$ticks_before" "$ticks_after" "$wal_before" "$wal_after") || true
    fi
    record "$(printf '{"workload":"%s","impl":"pgbench","backend":"postgresql","clients":%d,"tps":%s,"latency_avg_ms":%s,"transactions":%s,"seconds":%s%s,"ok":%s}' \
        "$workload" "$clients" "${tps:-null}" "${lat:-null}" "${txns:-0}" "$secs" "$extra" "$ok")"
}

echo "pg_test_fsync -s 1 on the server's disk" >&2
record "$(fsync_bounds)"

for ((r = 1; r <= rounds; r++)); do
    echo "round $r/$rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    for w in $workloads; do
        # shellcheck disable=SC2086
        case $w in
        w1)
            for c in $clients_list; do
                pgb pg-toggle "$c" toggle.sql pgb_w1 -D users=1000 -D posts=10000
                ours w1 --clients "$c" $W1_ARGS
            done ;;
        hot)
            pgb pg-toggle-hot "$hot_clients" toggle.sql pgb_w1 -D users=1000 -D posts=1
            ours w1 --clients "$hot_clients" --hot-post $W1_ARGS ;;
        w2)
            pgb pg-page 1 page.sql pgb_w2 -D users=$w2_users -D posts=$w2_posts
            ours_then_pgbench w2 $W2_ARGS ;;
        w2long)
            pgb pg-page 1 page.sql pgb_w2 -D users=$w2_users -D posts=$w2_posts
            ours w2 $W2_ARGS --queries "$w2_long_queries" ;;
        w4) ours w4 $W4_ARGS ;;
        w6) ours w6 $W6_ARGS ;;
        w7)
            for t in $w7_threads; do
                ours w7 --threads "$t" --writer group $W7_ARGS
                ours w7 --threads "$t" --writer mutex $W7_ARGS
            done ;;
        *) echo "unknown workload $w" >&2; exit 2 ;;
        esac
    done
done

python3 - "$results" <<'EOF'
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def pick(workload, impl, **match):
    return [r for r in rows if r["workload"] == workload and r.get("impl") == impl
            and all(r.get(k) == v for k, v in match.items())]
def med(rs, key):
    xs = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(xs) if xs else None
def fmt(x):
    if x is None: return "–"
    if abs(x) >= 1000: return f"{x:,.0f}"
    return f"{x:.3g}"
def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b
def verdict(value, goal):
    return "–" if value is None else ("met" if value >= goal else "**missed**")

out = []
def row(case, ours, pgb, goal=None):
    q = ratio(ours, pgb)
    out.append(f"| {case} | {fmt(ours)} | {fmt(pgb)} | {fmt(q) + '×' if q is not None else '–'} | "
               f"{'≥ ' + str(goal) + '×' if goal else ''} | {verdict(q, goal) if goal else ''} |")

pg1 = med(pick("pg-toggle", "pgbench", clients=1), "tps")
for c in sorted({r["clients"] for r in rows if r["workload"] == "w1" and not r.get("hot_post")}):
    o = med([r for r in pick("w1", "feedsync", clients=c) if not r.get("hot_post")], "ops_per_s")
    row(f"W1 toggle, {c} client{'s' if c > 1 else ''} (ops/s vs pgbench tps)", o,
        med(pick("pg-toggle", "pgbench", clients=c), "tps"), 0.8 if c == 16 else None)
for c in sorted({r["clients"] for r in rows if r["workload"] == "pg-toggle-hot"} |
                {r["clients"] for r in rows if r["workload"] == "w1" and r.get("hot_post")}):
    o = med(pick("w1", "feedsync", clients=c, hot_post=True), "ops_per_s")
    p = med(pick("pg-toggle-hot", "pgbench", clients=c), "tps")
    row(f"hot post: {c} clients, one post (ops/s vs tps)", o, p)
    spread_o = med([r for r in pick("w1", "feedsync", clients=c) if not r.get("hot_post")], "ops_per_s")
    spread_p = med(pick("pg-toggle", "pgbench", clients=c), "tps")
    if spread_o and o:
        out.append(f"| hot ÷ spread at {c} clients (ours / pgbench) | {fmt(ratio(o, spread_o))}× | "
                   f"{fmt(ratio(p, spread_p))}× | | | |")
if any(r["workload"] == "w2" for r in rows):
    every = pick("w2", "feedsync")
    page = med(pick("pg-page", "pgbench", clients=1), "tps")
    # By run length: the workload's 2,000 pages (or QUICK's 500), and the w2long case's pages.
    for queries in sorted({r["queries"] for r in every}):
        ours = [r for r in every if r["queries"] == queries]
        row(f"W2 page, 1 client, {queries:,} pages (queries/s vs tps)", med(ours, "queries_per_s"), page, 0.8)
        row(f"W2 p50 µs, {queries:,} pages (ours) vs pgbench average latency µs", med(ours, "p50_us"),
            (lambda x: x * 1000 if x else None)(med(pick("pg-page", "pgbench", clients=1), "latency_avg_ms")))
    own = med(pick("pg-page-ours", "pgbench", clients=1), "tps")
    if own is not None:
        # The reason measured: pgbench sending FeedSync's own statement on FeedSync's W2 database.
        row("W2 page, pgbench running FeedSync's statement (tps vs page.sql tps)", own, page)
        for queries in sorted({r["queries"] for r in every}):
            ours = [r for r in every if r["queries"] == queries]
            row(f"W2 page, {queries:,} pages (queries/s vs pgbench on our statement)", med(ours, "queries_per_s"), own)
    out.append(f"| W2 seed s (ours, bulk load) | {fmt(med(every, 'seed_s'))} | | | | |")
    sums = sorted({r.get("checksum") for r in every})
    out.append(f"| W2 checksums (ours, all runs) | {'/'.join(sums)} | | | | |")
if any(r["workload"] == "w4" for r in rows):
    row("W4 observed toggle, 1 client (ops/s vs pgbench toggle tps)", med(pick("w4", "feedsync"), "ops_per_s"), pg1)
if any(r["workload"] == "w6" for r in rows):
    rs = pick("w6", "feedsync")
    out.append(f"| W6 catch-up, events/s at least once | {fmt(med(rs, 'events_per_s'))} | | | ≥ 200,000 | "
               f"{verdict(med(rs, 'events_per_s'), 200000)} |")
    out.append(f"| W6 catch-up, events/s transactional | {fmt(med(rs, 'transactional_events_per_s'))} | | | | |")
    out.append(f"| W6 building the log, s | {fmt(med(rs, 'build_s'))} | | | | |")
for t in sorted({r["threads"] for r in rows if r["workload"] == "w7"}):
    p = med(pick("pg-toggle", "pgbench", clients=t), "tps")
    for writer in ("group", "mutex"):
        o = med(pick("w7", "feedsync", threads=t, writer=writer), "ops_per_s")
        if o is not None:
            row(f"W7 {t} threads, writer {writer} (ops/s vs pgbench tps at {t})", o, p)

# What bounds each figure: ours (feedsync-bench's own keys) beside pgbench's (sampled around its run) per case.
bounds = []
fsync = pick("bounds", "pg_test_fsync")
fsync_text = (f"fdatasync {fmt(med(fsync, 'fdatasync_us'))} µs, open_datasync {fmt(med(fsync, 'open_datasync_us'))} µs"
              if fsync else "–")
def pair(o, p, key):
    a, b = med(o, key), med(p, key)
    return f"{fmt(a)} / {fmt(b)}"
def bound(case, o, p):
    if not o and not p: return
    bounds.append(f"| {case} | {pair(o, p, 'server_cpu_us_per_op')} | {pair(o, p, 'wal_bytes_per_op')} | "
                  f"{pair(o, p, 'wal_records_per_op')} | {pair(o, p, 'wal_syncs_per_op')} | "
                  f"{fmt(med(o, 'round_trips_per_op'))} | {fmt(med(o, 'client_cpu_us_per_op'))} | "
                  f"{fmt(med(o, 'commit_alone_us'))} |")
for c in sorted({r["clients"] for r in rows if r["workload"] in ("w1", "pg-toggle") and not r.get("hot_post")}):
    bound(f"W1 toggle, {c} client{'s' if c > 1 else ''}",
          [r for r in pick("w1", "feedsync", clients=c) if not r.get("hot_post")], pick("pg-toggle", "pgbench", clients=c))
for c in sorted({r["clients"] for r in rows if r["workload"] == "pg-toggle-hot" or r.get("hot_post")}):
    bound(f"hot post, {c} clients", pick("w1", "feedsync", clients=c, hot_post=True), pick("pg-toggle-hot", "pgbench", clients=c))
for queries in sorted({r["queries"] for r in rows if r["workload"] == "w2"}):
    bound(f"W2 page, {queries:,} pages", [r for r in pick("w2", "feedsync") if r["queries"] == queries],
          pick("pg-page", "pgbench", clients=1))
if pick("pg-page-ours", "pgbench"):
    bound("W2 page: pgbench on FeedSync's statement", [], pick("pg-page-ours", "pgbench", clients=1))
if pick("w4", "feedsync"):
    bound("W4 observed toggle", pick("w4", "feedsync"), pick("pg-toggle", "pgbench", clients=1))
for t in sorted({r["threads"] for r in rows if r["workload"] == "w7"}):
    for writer in ("group", "mutex"):
        if pick("w7", "feedsync", threads=t, writer=writer):
            bound(f"W7 {t} threads, writer {writer}", pick("w7", "feedsync", threads=t, writer=writer),
                  pick("pg-toggle", "pgbench", clients=t))

counts = {}
for r in rows:
    counts[r["workload"], r.get("impl")] = counts.get((r["workload"], r.get("impl")), 0) + 1
failed = [r for r in rows if not r.get("ok")]
print(f"\n{len(rows)} runs from {sys.argv[1]} (server storage: {', '.join(sorted({r.get('storage', '?') for r in rows}))}); runs per (workload, impl): " +
      ", ".join(f"{w}/{i}={n}" for (w, i), n in sorted(counts.items())))
print("| case (medians) | FeedSync | pgbench | ours ÷ pgbench | goal | |")
print("|---|---:|---:|---:|---|---|")
print("\n".join(out))
if bounds:
    print(f"\nWhat bounds each figure (medians per op or transaction, ours / pgbench; disk flush alone: {fsync_text})")
    print("| case | server CPU µs | WAL bytes | WAL records | WAL syncs | round trips (ours) | client CPU µs (ours) "
          "| commit alone µs (ours) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(bounds))
print(f"\nfailed checks: {len(failed)}" + "".join(f"\n  {json.dumps(r)}" for r in failed))
sys.exit(1 if failed else 0)
EOF
table=$?
echo "JSON lines: $results" >&2
[ $status = 0 ] && [ $table = 0 ]
