#!/bin/bash
# How long SQLite writers in several processes wait for each other's write lock.
#
# Usage: Docs/bench/busy-wait.sh FEEDSYNC_BENCH FEEDSYNC [PROCESSES] [COMMANDS] [CHECKPOINT]
#   FEEDSYNC_BENCH  a feedsync-bench binary (its `agent-writer`)
#   FEEDSYNC        a feedsync binary (seeds the database)
#   PROCESSES       writer processes at once (default 4)
#   COMMANDS        toggles each, back to back (default 20000)
#   CHECKPOINT      inline or background (default: the library's default)
#
# Seeds a fresh database (10,000 posts, 1,000 users), starts PROCESSES `agent-writer --rate 0` processes on it,
# each toggling as fast as it can and printing `seq wallNanos` after each commit, and prints for each process the
# longest and the 99th-percentile time between two of its commits (a command's wait for the lock plus its own
# work) and the span of its run. Exit status 1 if any writer failed (e.g. `database is busy`).
# Docs/Storage.md ("Busy policy") has the figures.
set -euo pipefail
bench=${1:?usage: busy-wait.sh FEEDSYNC_BENCH FEEDSYNC [PROCESSES] [COMMANDS] [CHECKPOINT]}
feedsync=${2:?usage: busy-wait.sh FEEDSYNC_BENCH FEEDSYNC [PROCESSES] [COMMANDS] [CHECKPOINT]}
processes=${3:-4}
commands=${4:-20000}
checkpoint=${5:+--checkpoint $5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
db=$dir/db.sqlite
"$feedsync" --db "$db" seed --posts 10000 --users 1000 --likes 0 >/dev/null
pids=()
for k in $(seq 1 "$processes"); do
    # shellcheck disable=SC2086 # $checkpoint is empty or two words
    "$bench" agent-writer --db "$db" --rate 0 --count "$commands" $checkpoint >"$dir/out$k" 2>"$dir/err$k" &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for k in $(seq 1 "$processes"); do
    python3 - "$dir/out$k" "$k" <<'EOF'
import sys
stamps = [int(line.split()[1]) for line in open(sys.argv[1]) if len(line.split()) == 2]
gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
if gaps:
    print(f"writer {sys.argv[2]}: {len(stamps)} commits, longest {gaps[-1] / 1e6:.1f} ms, "
          f"p99 {gaps[int(len(gaps) * 0.99)] / 1e6:.2f} ms, span {(stamps[-1] - stamps[0]) / 1e9:.2f} s")
else:
    print(f"writer {sys.argv[2]}: {len(stamps)} commits")
EOF
    if [ -s "$dir/err$k" ]; then head -3 "$dir/err$k" >&2; fi
done
exit "$status"
