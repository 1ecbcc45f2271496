#!/usr/bin/env bash
# soak.sh loads `omnistage serve` (the built-in pipeline) with mixed traffic
# for a while (SOAK_DURATION, default 30m: concurrency 4, a fifth of the
# requests aborted at random points, ids reused) and samples the server's
# resident memory every 10 s. It writes the bench report and the RSS series
# to SOAK_OUT (default soak-result.txt) and fails when the RSS grew by 5 % or
# more from minute 5 (or from a sixth of the run, if shorter) to the end, or
# when the bench failed (an unexpected error, or a leak after the load).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${SOAK_DURATION:-30m}
out=${SOAK_OUT:-soak-result.txt}
# shellcheck source=scripts/serve-lib.sh
. scripts/serve-lib.sh
start_server soak

rss=$(mktemp)
(
	start=$(date +%s)
	while kill -0 $server 2>/dev/null; do
		echo "$(( $(date +%s) - start )) $(awk '/^VmRSS/ {print $2}' /proc/$server/status)"
		sleep 10
	done
) >"$rss" &
sampler=$!

status=0
report=$("$bin" bench --url "http://$addr" --duration "$duration" -c 4 --abort-ratio 0.2 --reuse-ids 8 --json) || status=$?
kill $sampler 2>/dev/null || true

seconds=$(awk 'END {print $1}' "$rss")
from=$(( seconds / 6 < 300 ? seconds / 6 : 300 ))
verdict=$(awk -v from="$from" '
	$1 >= from && first == "" { first = $2 }
	{ last = $2 }
	END {
		growth = (last - first) * 100 / first
		printf "rss %d KiB at %d s, %d KiB at the end: %+.1f %%\n", first, from, last, growth
		exit growth >= 5
	}' "$rss") || status=1
{
	echo "omnistage soak: $duration at concurrency 4, abort ratio 0.2, ids reused; $(date -u +%FT%TZ)"
	echo "$verdict"
	echo "bench: $report"
	echo "rss series (seconds KiB):"
	cat "$rss"
} >"$out"
rm -f "$rss"
echo "$verdict"
echo "wrote $out"
exit $status
