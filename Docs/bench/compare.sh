#!/usr/bin/env bash
# Side-by-side benchmarks: FeedSync's feedsync-bench against the peers (raw sqlite3, GRDB, OpenCombine,
# AsyncStream) of ../shared/peers, interleaved A B A B, then a table of medians and ratios (ours ÷ peer).
#
# usage: Docs/bench/compare.sh [ROUNDS]            (default 3 rounds, default sizes; ~15 min on 2 cores)
#        QUICK=1 Docs/bench/compare.sh 1           (tiny sizes, a smoke comparison in well under a minute)
#
# Environment:
#   PEERS_DIR     the peers package (default: ../shared/peers relative to the repository); it is copied to a
#                 temporary directory and built there, so the folder itself is never written.
#   WORKLOADS     which workloads to run (default "w1 w2 w3 w4 w5 w6 w7").
#   W1_ARGS … W7_ARGS  extra flags for a workload, passed to both sides where the peer has it (W5/W6: ours only).
#   W7_THREADS    the thread counts W7 runs at (default "1 4 16"); each is its own run on both sides.
#   W7_WRITERS    our W7 variants (default "group"; "group mutex" also runs `--writer mutex`, the calls
#                 serialised by a bench-side mutex so group commit has nothing to group: its reference).
#   RESULTS       where to append the JSON lines (default: a temporary file, path printed at the end).
#   SKIP_BUILD=1  use the binaries already built in .build-bench and .build-peers (or OURS_BIN, PEER_BIN).
#   BENCH_SCRATCH, PEERS_SCRATCH  the build directories (default .build-bench and .build-peers in the repository).
# A second table lists what bounds our figures on this machine (Docs/bench/README.md, "What bounds a figure"):
# feedsync-bench's client CPU (and instructions, where counted) per op and SQLite's lone commit.
# Exit status 1 when any run failed its checks.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-3}
peers=${PEERS_DIR:-$root/../shared/peers}
workloads=${WORKLOADS:-"w1 w2 w3 w4 w5 w6 w7"}
w7_threads=${W7_THREADS:-"1 4 16"}
w7_writers=${W7_WRITERS:-group}
results=${RESULTS:-$(mktemp /tmp/feedsync-compare.XXXXXX.jsonl)}

if [ "${QUICK:-0}" = 1 ]; then
    : "${W1_ARGS:=--ops 2000}"
    : "${W2_ARGS:=--posts 10000 --users 1000 --likes 50000 --queries 500}"
    : "${W3_ARGS:=--events 100000}"
    : "${W4_ARGS:=--ops 2000}"
    : "${W5_ARGS:=--rate 200 --seconds 2 --idle-seconds 2}"
    : "${W6_ARGS:=--events 50000}"
    : "${W7_ARGS:=--ops 2000}"
fi
W1_ARGS=${W1_ARGS:-}; W2_ARGS=${W2_ARGS:-}; W3_ARGS=${W3_ARGS:-}
W4_ARGS=${W4_ARGS:-}; W5_ARGS=${W5_ARGS:-}; W6_ARGS=${W6_ARGS:-}; W7_ARGS=${W7_ARGS:-}

bench_scratch=${BENCH_SCRATCH:-$root/.build-bench}
peers_scratch=${PEERS_SCRATCH:-$root/.build-peers}
ours=${OURS_BIN:-$bench_scratch/release/feedsync-bench}
theirs=${PEER_BIN:-$peers_scratch/release/peerbench}
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    echo "building feedsync-bench (release)" >&2
    (cd "$root" && swift build -c release --scratch-path "$bench_scratch" --product feedsync-bench >&2) || exit 2
    # Build from a copy: the peers folder is shared and read-only (SwiftPM would write Package.resolved there).
    build_dir=$(mktemp -d /tmp/peers-src.XXXXXX)
    trap 'rm -rf "$build_dir"' EXIT
    cp -r "$peers/." "$build_dir" && chmod -R u+w "$build_dir"
    echo "building peerbench (release) in $build_dir" >&2
    (cd "$build_dir" && swift build -c release --scratch-path "$peers_scratch" >&2) || exit 2
fi

status=0
# run LABEL BINARY ARGS...: one run, its JSON line appended to $results.
run() {
    local label=$1; shift
    echo "  $label: $(basename "$1") ${*:2}" >&2
    local line
    # shellcheck disable=SC2068
    line=$("$@") || status=1
    [ -n "$line" ] && echo "$line" >> "$results"
    [ -n "$line" ] || { echo "    (no output)" >&2; status=1; }
}

for ((r = 1; r <= rounds; r++)); do
    echo "round $r/$rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    for w in $workloads; do
        case $w in
        w1)
            # shellcheck disable=SC2086
            for batch in 1 100; do
                run ours "$ours" w1 --batch $batch $W1_ARGS
                run raw "$theirs" w1 --impl raw --batch $batch $W1_ARGS
                run ours "$ours" w1 --batch $batch $W1_ARGS
                run grdb "$theirs" w1 --impl grdb --batch $batch $W1_ARGS
            done ;;
        w2)
            # shellcheck disable=SC2086
            { run ours "$ours" w2 $W2_ARGS; run raw "$theirs" w2 --impl raw $W2_ARGS
              run ours "$ours" w2 $W2_ARGS; run grdb "$theirs" w2 --impl grdb $W2_ARGS; } ;;
        w3)
            # shellcheck disable=SC2086
            { run ours "$ours" w3 $W3_ARGS; run peer "$theirs" w3 $W3_ARGS; } ;;
        w4)
            # shellcheck disable=SC2086
            { run ours "$ours" w4 $W4_ARGS; run raw "$theirs" w4 --impl raw $W4_ARGS
              run ours "$ours" w4 $W4_ARGS; run grdb "$theirs" w4 --impl grdb $W4_ARGS; } ;;
        # shellcheck disable=SC2086
        w5) run ours "$ours" w5 $W5_ARGS ;;
        # shellcheck disable=SC2086
        w6) run ours "$ours" w6 $W6_ARGS ;;
        w7)
            # shellcheck disable=SC2086
            for t in $w7_threads; do
                for writer in $w7_writers; do run ours "$ours" w7 --threads "$t" --writer "$writer" $W7_ARGS; done
                run raw "$theirs" w7 --impl raw --threads "$t" $W7_ARGS
                for writer in $w7_writers; do run ours "$ours" w7 --threads "$t" --writer "$writer" $W7_ARGS; done
                run grdb "$theirs" w7 --impl grdb --threads "$t" $W7_ARGS
            done ;;
        *) echo "unknown workload $w" >&2; exit 2 ;;
        esac
    done
done

python3 - "$results" <<'EOF'
import json, statistics, sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def impl(r):
    return r.get("impl", "peer" if r["workload"] == "w3" else "?")
def pick(workload, who, **match):
    return [r for r in rows if r["workload"] == workload and impl(r) == who
            and all(r.get(k) == v for k, v in match.items())]
def med(rs, key):
    xs = [r[key] for r in rs if key in r and r[key] is not None]
    return statistics.median(xs) if xs else None
def fmt(x, unit=""):
    if x is None: return "–"
    if abs(x) >= 1e6: return f"{x/1e6:.2f}M{unit}"
    if abs(x) >= 1000: return f"{x:,.0f}{unit}"
    return f"{x:.3g}{unit}"
def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b
def verdict(value, goal, higher=True):
    if value is None: return "–"
    return "met" if (value >= goal if higher else value <= goal) else "**missed**"

out = []
def row(workload, figure, ours, peer, r, goal="", met=""):
    out.append(f"| {workload} | {figure} | {ours} | {peer} | {r} | {goal} | {met} |")

failed = [r for r in rows if not r.get("ok")]
counts = {}
for r in rows:
    counts[(r["workload"], impl(r))] = counts.get((r["workload"], impl(r)), 0) + 1

if any(r["workload"] == "w7" for r in rows):
    # W7 at T threads against the peers (goal ≥ 2× GRDB at 4 and 16) and never below our own W1 at
    # one op per transaction, when W1 ran in the same results file.
    w1_ours = med(pick("w1", "feedsync", batch=1), "ops_per_s")
    for t in sorted({r["threads"] for r in rows if r["workload"] == "w7"}):
        o = med(pick("w7", "feedsync", threads=t, writer="group"), "ops_per_s")
        for peer in ("raw", "grdb"):
            p = med(pick("w7", peer, threads=t), "ops_per_s")
            q = ratio(o, p)
            goal = peer == "grdb" and t > 1
            row("W7 concurrent toggle", f"ops/s, T = {t}, vs {peer}", fmt(o), fmt(p), fmt(q) + "×",
                "≥ 2×" if goal else "", verdict(q, 2.0) if goal else "")
        serial = med(pick("w7", "feedsync", threads=t, writer="mutex"), "ops_per_s")
        if serial is not None:
            q = ratio(o, serial)
            row("W7 concurrent toggle", f"T = {t}: group commit vs calls serialised (ours, mutex)", fmt(o), fmt(serial),
                fmt(q) + "×", "", "")
        if w1_ours is not None:
            q = ratio(o, w1_ours)
            row("W7 concurrent toggle", f"T = {t} vs our W1 (1 thread, 1 op/tx)", fmt(o), fmt(w1_ours), fmt(q) + "×",
                "≥ 1.0×", verdict(q, 1.0))
if any(r["workload"] == "w1" for r in rows):
    for b in (1, 100):
        o = med(pick("w1", "feedsync", batch=b), "ops_per_s")
        # Goals: W1 ≥ 0.8× raw and ≥ 1.0× GRDB.
        for peer, goal in (("raw", 0.8), ("grdb", 1.0)):
            p = med(pick("w1", peer, batch=b), "ops_per_s")
            q = ratio(o, p)
            row("W1 toggle", f"ops/s, batch {b}, vs {peer}", fmt(o), fmt(p), fmt(q) + "×", f"≥ {goal}×", verdict(q, goal))
if any(r["workload"] == "w2" for r in rows):
    ours = pick("w2", "feedsync")
    for peer in ("raw", "grdb"):
        theirs = pick("w2", peer)
        q = ratio(med(ours, "queries_per_s"), med(theirs, "queries_per_s"))
        g = (0.9, True) if peer == "raw" else None
        row("W2 page", f"queries/s vs {peer}", fmt(med(ours, "queries_per_s")), fmt(med(theirs, "queries_per_s")), fmt(q) + "×",
            "≥ 0.9×" if g else "", verdict(q, 0.9) if g else "")
        q = ratio(med(ours, "p50_us"), med(theirs, "p50_us"))
        row("W2 page", f"p50 µs vs {peer}", fmt(med(ours, "p50_us")), fmt(med(theirs, "p50_us")), fmt(q) + "×", "", "")
        q = ratio(med(ours, "p99_us"), med(theirs, "p99_us"))
        row("W2 page", f"p99 µs vs {peer}", fmt(med(ours, "p99_us")), fmt(med(theirs, "p99_us")), fmt(q) + "×",
            "≤ 1.5×" if peer == "raw" else "", verdict(q, 1.5, higher=False) if peer == "raw" else "")
        q = ratio(med(ours, "seed_s"), med(theirs, "seed_s"))
        row("W2 page", f"seed s vs {peer}", fmt(med(ours, "seed_s")), fmt(med(theirs, "seed_s")), fmt(q) + "×",
            "≤ 1.5×" if peer == "raw" else "", verdict(q, 1.5, higher=False) if peer == "raw" else "")
    row("W2 page", "seed peak RSS MB", fmt(med(ours, "peak_rss_mb")), "", "", "", "")
    sums = sorted({r.get("checksum") for r in rows if r["workload"] == "w2"})
    row("W2 page", "checksums (all runs)", "/".join(sums), "", "", "all equal", "met" if len(sums) == 1 else "**missed**")
if any(r["workload"] == "w3" for r in rows):
    ours, theirs = pick("w3", "feedsync"), pick("w3", "peer")
    keys = sorted({k for r in ours for k in r if k.startswith(("passthrough_s", "currentvalue_s"))},
                  key=lambda k: (k.split("_s")[0], int(k.split("_s")[1])))
    for k in keys:
        kind, s = k.split("_s")
        q = ratio(med(ours, k), med(theirs, k))
        goal = kind == "passthrough" and s in ("10", "100")
        row("W3 fan-out", f"{k} deliveries/s vs OpenCombine", fmt(med(ours, k)), fmt(med(theirs, k)), fmt(q) + "×",
            "≥ 2×" if goal else "", verdict(q, 2.0) if goal else "")
    if any("values_s1" in r for r in ours):
        q = med(ours, "values_vs_asyncstream")
        row("W3 fan-out", "values_s1 vs AsyncStream (same run)", fmt(med(ours, "values_s1")), fmt(med(ours, "asyncstream_s1")),
            fmt(q) + "×", "≥ 1.0×", verdict(q, 1.0))
        q = ratio(med(ours, "values_s1"), med(theirs, "asyncstream_s1"))
        row("W3 fan-out", "values_s1 vs peer's AsyncStream run", fmt(med(ours, "values_s1")), fmt(med(theirs, "asyncstream_s1")),
            fmt(q) + "×", "", "")
if any(r["workload"] == "w4" for r in rows):
    o = med(pick("w4", "feedsync"), "ops_per_s")
    # Goal: W4 ≥ 1.2× GRDB.
    for peer, goal in (("raw", None), ("grdb", 1.2)):
        p = med(pick("w4", peer), "ops_per_s")
        q = ratio(o, p)
        row("W4 observed toggle", f"ops/s vs {peer}", fmt(o), fmt(p), fmt(q) + "×",
            f"≥ {goal}×" if goal else "", verdict(q, goal) if goal else "")
if any(r["workload"] == "w5" for r in rows):
    rs = pick("w5", "feedsync")
    rate = rs[0].get("rate") if rs else None
    row("W5 cross-process", "p50 ms", fmt(med(rs, "p50_ms")), "", "", "", "")
    row("W5 cross-process", f"p99 ms at {rate}/s", fmt(med(rs, "p99_ms")), "", "", "< 10 ms", verdict(med(rs, "p99_ms"), 10, higher=False))
    row("W5 cross-process", "max ms", fmt(med(rs, "max_ms")), "", "", "", "")
    worst = max((r["missed"] for r in rs), default=None)
    row("W5 cross-process", "missed (worst run)", fmt(worst), "", "", "0", verdict(worst, 0, higher=False))
    row("W5 cross-process", "idle CPU %", fmt(med(rs, "idle_cpu_pct")), "", "", "< 0.5 %", verdict(med(rs, "idle_cpu_pct"), 0.5, higher=False))
if any(r["workload"] == "w6" for r in rows):
    rs = pick("w6", "feedsync")
    row("W6 catch-up", "events/s, at least once", fmt(med(rs, "events_per_s")), "", "", "≥ 1M", verdict(med(rs, "events_per_s"), 1e6))
    row("W6 catch-up", "events/s, transactional", fmt(med(rs, "transactional_events_per_s")), "", "", "", "")

print(f"\n{len(rows)} runs from {sys.argv[1]}; runs per (workload, impl): " +
      ", ".join(f"{w}/{i}={n}" for (w, i), n in sorted(counts.items())))
print("| workload | figure (median) | FeedSync | peer | ratio ours ÷ peer | goal | |")
print("|---|---|---|---|---|---|---|")
print("\n".join(out))
bounds = []
for w, name in (("w1", "W1 toggle"), ("w2", "W2 page"), ("w4", "W4 observed toggle"), ("w7", "W7 concurrent toggle")):
    for r0 in sorted({(r.get("batch"), r.get("threads"), r.get("writer")) for r in pick(w, "feedsync")}, key=str):
        rs = [r for r in pick(w, "feedsync") if (r.get("batch"), r.get("threads"), r.get("writer")) == r0]
        label = name + "".join(f", {k} {v}" for k, v in zip(("batch", "threads", "writer"), r0) if v is not None)
        bounds.append(f"| {label} | {fmt(med(rs, 'client_cpu_us_per_op'))} | {fmt(med(rs, 'client_instructions_per_op'))} | "
                      f"{fmt(med(rs, 'commit_alone_us'))} |")
if bounds:
    print("\nWhat bounds our figures (medians; instructions only where the machine counts them)")
    print("| case | client CPU µs/op | client instructions/op | SQLite commit alone µs |")
    print("|---|---:|---:|---:|")
    print("\n".join(bounds))
print(f"\nfailed checks: {len(failed)}" + "".join(f"\n  {json.dumps(r)}" for r in failed))
sys.exit(1 if failed else 0)
EOF
table=$?
echo "JSON lines: $results" >&2
[ $status = 0 ] && [ $table = 0 ]
