#!/usr/bin/env bash
# bench-instructions.sh OLD NEW PKG BENCH [N] compares the instructions one
# iteration of benchmark BENCH (a -test.bench pattern) of package PKG
# (./internal/payload) costs at git revisions OLD and NEW, counted by
# valgrind's callgrind: unlike time, the count does not depend on what
# else the machine runs. Each side runs N and 3N iterations (N defaults to
# 100); the difference over 2N is the cost of one.
#   scripts/bench-instructions.sh 583ca94 HEAD ./internal/payload 'BenchmarkStream/signed/write.read'
set -euo pipefail
old=$1 new=$2 pkg=$3 bench=$4 n=${5:-100}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/old" >/dev/null 2>&1 || true; git -C "$root" worktree remove --force "$work/new" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
count() { # binary dir iterations
	(cd "$2" && GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$1" -test.run '^$' -test.bench "$bench" -test.benchtime "$3x" 2>&1 | awk '/Collected/ {print $4}')
}
for side in old new; do
	rev=${!side}
	git -C "$root" worktree add -q --detach "$work/$side" "$rev"
	(cd "$work/$side" && go test -c -o "$work/$side.test" "$pkg")
	dir="$work/$side/${pkg#./}"
	a=$(count "$work/$side.test" "$dir" "$n")
	b=$(count "$work/$side.test" "$dir" $((3 * n)))
	echo "$side ($rev): $(((b - a) / (2 * n))) instructions per iteration of $bench"
done
