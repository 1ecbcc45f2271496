#!/usr/bin/env bash
# capacity.sh measures the numbers of docs/capacity.md: what each stage
# costs in CPU time, and what a whole server does under `omnistage bench`
# when pinned to some cores. CPU time (perf's task-clock, or utime+stime of
# /proc/PID/stat summed over a server and its workers) is what the model
# takes as input, because it barely moves when other programs share the
# machine; wall-clock figures (throughput, latency) are only checked.
# Nothing downloads; it needs perf, taskset, curl, jq and a built
# bin/omnistage (go build -o bin/omnistage ./cmd/omnistage).
#
#   scripts/capacity.sh stages [REPS]            # CPU ms per op of each stage benchmark
#   scripts/capacity.sh serve CPUS LAYOUT C DUR [TEXTS] [BENCHCPUS]
#                                                # bench a pinned server, closed loop with C in flight
#   scripts/capacity.sh rate CPUS LAYOUT R DUR [TEXTS] [BENCHCPUS]
#                                                # the same at an open-loop rate of R requests/s
#   scripts/capacity.sh formats CPUS N TEXT      # server CPU per request of each response format, and with timestamps
#   scripts/capacity.sh size R T1 TARGET [U [K]] # the sizing table: streams per core count at a p99 time to first audio
#
# CPUS and BENCHCPUS are taskset lists (0, 0-1). LAYOUT is inproc (the
# built-in tts as it ships: one replica per stage, max_inflight 64, turns;
# docs/capacity.md was measured when it held 2 and took no turns), inproc2
# (talker and vocoder replicas: 2, max_inflight 2), wide (one replica,
# max_inflight: 16), process (talker
# and vocoder in workers, replicas: 1), process2 (replicas: 2), or remote
# (talker and vocoder on two stage servers over /v1/run, pinned to CPUS
# too). `serve` and `rate` print one JSON object: bench's report plus
# server_cpu_s (every process of the deployment), bench_cpu_s (the load
# generator) and wall_s. With CAPACITY_PERF=FILE set, `serve` and `rate`
# also sample the deployment's processes into FILE with perf record
# (read it with perf report -i FILE --sort dso,sym).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin/omnistage
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

# treecpu PID... prints the CPU seconds of each PID and of every live
# descendant, summed: utime+stime, and cutime+cstime for the children they
# waited for (an aac answer's ffmpeg).
treecpu() {
	local all=" $* " changed=1
	while [ $changed = 1 ]; do
		changed=0
		for s in /proc/[0-9]*/stat; do
			read -r line <"$s" 2>/dev/null || continue
			local rest=${line##*) } pid=${s#/proc/}
			pid=${pid%/stat}
			set -- $rest
			if [[ $all == *" $2 "* && $all != *" $pid "* ]]; then all+="$pid "; changed=1; fi
		done
	done
	local ticks=0
	for pid in $all; do
		read -r line <"/proc/$pid/stat" 2>/dev/null || continue
		set -- ${line##*) }
		ticks=$((ticks + ${12} + ${13} + ${14} + ${15}))
	done
	awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f\n", t / hz }'
}

# port prints a loopback port nothing listens on.
port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}

# waitready URL waits up to 30 s for URL/ready to answer 200.
waitready() {
	for _ in $(seq 300); do
		curl -fs "$1/ready" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "capacity.sh: $1 not ready" >&2
	return 1
}

# config CPUS LAYOUT sets cfg to the front end's config, written for the
# layout, and starts any stage servers (in this shell, so that pids holds
# them).
config() {
	local cpus=$1 layout=$2 f=$work/front.yaml
	cfg=$f
	local head='pipeline:
  name: tts
  input: text
  stages:
    - {id: 0, name: talker,  engine: flite-talker,  input: text,   output: frames}
    - {id: 1, name: vocoder, engine: flite-vocoder, input: frames, output: audio, final_output: true}
  aligner: {engine: sphinx-aligner}
deploy:
  stages:'
	case $layout in
	inproc) cfg=builtin:tts ;;
	inproc2) printf '%s\n    - {id: 0, replicas: 2, options: {voice: slt}}\n    - {id: 1, replicas: 2}\n' "$head" >"$f" ;;
	wide) printf '%s\n    - {id: 0, max_inflight: 16, options: {voice: slt}}\n    - {id: 1, max_inflight: 16}\n' "$head" >"$f" ;;
	process) printf '%s\n    - {id: 0, placement: process, options: {voice: slt}}\n    - {id: 1, placement: process}\n' "$head" >"$f" ;;
	process2) printf '%s\n    - {id: 0, replicas: 2, placement: process, options: {voice: slt}}\n    - {id: 1, replicas: 2, placement: process}\n' "$head" >"$f" ;;
	remote)
		head -c 32 /dev/urandom | base64 >"$work/key"
		local p0 p1
		p0=$(port) p1=$(port)
		taskset -c "$cpus" "$bin" serve --stage 0 --config builtin:tts --payload-key-file "$work/key" --addr "127.0.0.1:$p0" --log-level error >/dev/null 2>>"$work/stage.log" &
		pids+=($!)
		taskset -c "$cpus" "$bin" serve --stage 1 --config builtin:tts --payload-key-file "$work/key" --addr "127.0.0.1:$p1" --log-level error >/dev/null 2>>"$work/stage.log" &
		pids+=($!)
		waitready "http://127.0.0.1:$p0" && waitready "http://127.0.0.1:$p1"
		printf '%s\n    - {id: 0, placement: remote, endpoints: ["http://127.0.0.1:%s"]}\n    - {id: 1, placement: remote, endpoints: ["http://127.0.0.1:%s"]}\n' "$head" "$p0" "$p1" >"$f"
		;;
	*) echo "capacity.sh: unknown layout $layout" >&2; exit 2 ;;
	esac
}

# server CPUS LAYOUT starts the deployment and sets url.
server() {
	local p keyflag=()
	config "$1" "$2"
	[ -f "$work/key" ] && keyflag=(--payload-key-file "$work/key")
	p=$(port)
	url=http://127.0.0.1:$p
	taskset -c "$1" "$bin" serve --config "$cfg" "${keyflag[@]}" --addr "127.0.0.1:$p" --log-level error >/dev/null 2>>"$work/serve.log" &
	pids+=($!)
	waitready "$url"
}

# load CPUS LAYOUT MODEFLAG VALUE DUR [TEXTS] [BENCHCPUS] runs one bench.
load() {
	local cpus=$1 layout=$2 flag=$3 val=$4 dur=$5 texts=${6:-} bcpus=${7:-}
	[ -z "$bcpus" ] && bcpus=$cpus
	server "$cpus" "$layout"
	local tflag=()
	[ -n "$texts" ] && tflag=(--texts "$texts")
	# a short warm-up, so that first-call costs are not counted
	taskset -c "$bcpus" "$bin" bench --url "$url" -n 6 -c 2 "${tflag[@]}" >/dev/null
	local c0 c1 t0 t1
	local rec=
	if [ -n "${CAPACITY_PERF:-}" ]; then
		perf record -q -F 499 -o "$CAPACITY_PERF" -p "$(IFS=,; echo "${pids[*]}")" &
		rec=$!
	fi
	c0=$(treecpu "${pids[@]}")
	t0=$(date +%s.%N)
	perf stat -x, -o "$work/bench.perf" -e task-clock -- taskset -c "$bcpus" \
		"$bin" bench --url "$url" --duration "$dur" "$flag" "$val" "${tflag[@]}" --json >"$work/bench.json" || true
	t1=$(date +%s.%N)
	c1=$(treecpu "${pids[@]}")
	if [ -n "$rec" ]; then kill -INT "$rec"; wait "$rec" || true; fi
	local bcpu
	bcpu=$(awk -F, '/task-clock/ {printf "%.2f", $1/1000}' "$work/bench.perf")
	jq -c --arg cpus "$cpus" --arg layout "$layout" --arg mode "${flag//-/}" --argjson val "$val" \
		--argjson c0 "$c0" --argjson c1 "$c1" --argjson b "$bcpu" --argjson t0 "$t0" --argjson t1 "$t1" '
		def r(n): . * pow(10; n) | round / pow(10; n);
		{cpus: $cpus, layout: $layout, ($mode): $val, requests, ok, errors, rps,
		 audio_s: .audio_seconds, audio_s_per_s: .audio_seconds_per_second, latency_ms, ttfa_ms, leaks_ok: .leaks.ok,
		 server_cpu_s: ($c1 - $c0 | r(2)), bench_cpu_s: $b, wall_s: ($t1 - $t0 | r(2)),
		 server_cpu_ms_per_req: (1000 * ($c1 - $c0) / ([.requests, 1] | max) | r(1)),
		 server_cpu_s_per_audio_s: (($c1 - $c0) / ([.audio_seconds, 1e-9] | max) | r(4)),
		 bench_cpu_s_per_audio_s: ($b / ([.audio_seconds, 1e-9] | max) | r(4))}' "$work/bench.json"
}

# stages runs each stage benchmark at n and 4n iterations under perf and
# prints the CPU time of one iteration (the difference over 3n).
stages() {
	local reps=${1:-1}
	for pkg in engine/flite engine/sphinx audio/encode hop; do
		(cd "$root" && go test -c -o "$work/${pkg//\//_}.test" "./internal/$pkg")
	done
	one() { # pkg bench n
		local t=$work/${1//\//_}.test dir=$root/internal/$1 a b out
		for k in 1 4; do
			(cd "$dir" && perf stat -x, -o "$work/p$k" -e task-clock -- "$t" -test.run '^$' -test.bench "$2" \
				-test.benchtime "$(($3 * k))x" -test.count 1 >"$work/o$k")
		done
		a=$(awk -F, '/task-clock/ {print $1}' "$work/p1")
		b=$(awk -F, '/task-clock/ {print $1}' "$work/p4")
		out=$(grep -h '^Benchmark' "$work/o4" | head -1 | tr -s ' \t' ' ')
		echo "$2 cpu_ms_per_op=$(awk -v a="$a" -v b="$b" -v n="$3" 'BEGIN { printf "%.3f", (b - a) / (3 * n) }') :: $out"
	}
	for _ in $(seq "$reps"); do
		for v in slt kal16; do
			one engine/flite "^BenchmarkTalker\$/^$v\$" 20
			one engine/flite "^BenchmarkVocoder\$/^$v\$" 20
			one engine/flite "^BenchmarkFirstBlock\$/^$v\$/^short\$" 100
		done
		one engine/sphinx '^BenchmarkAlign$' 10
		for f in mp3 opus aac flac wav pcm; do
			one audio/encode "^BenchmarkEncode\$/^$f\$" 10
		done
		for h in inproc remote; do
			one hop "^BenchmarkHop\$/^$h\$/^chunks=1\$" 300
			one hop "^BenchmarkHop\$/^$h\$/^chunks=64\$" 100
		done
	done
}

# formats CPUS N TEXT sends N sequential requests per response format to
# a pinned in-process server and prints its CPU ms per request.
formats() {
	local cpus=$1 n=$2 text=$3
	server "$cpus" inproc
	local body c0 c1
	req() { # format extra-header
		body=$(jq -nc --arg t "$text" --arg f "$1" '{model: "tts", input: $t, response_format: $f}')
		curl -fs "$url/v1/audio/speech" -H 'Content-Type: application/json' ${2:+-H "$2"} -d "$body" -o /dev/null
	}
	for f in pcm wav flac mp3 opus aac pcm+timestamps; do
		local fmt=${f%+*} hdr=
		[ "$f" != "$fmt" ] && hdr='X-Word-Timestamps: true'
		req "$fmt" "$hdr"
		c0=$(treecpu "${pids[@]}")
		for _ in $(seq "$n"); do req "$fmt" "$hdr"; done
		c1=$(treecpu "${pids[@]}")
		echo "$f server_cpu_ms_per_req=$(awk -v a="$c0" -v b="$c1" -v n="$n" 'BEGIN { printf "%.1f", 1000 * (b - a) / n }')"
	done
}

# size R T1 TARGET [U [K]] prints, for 1 to 64 cores, how many real-time
# streams the model of docs/capacity.md says fit under a p99 time to first
# audio of TARGET ms: R is the CPU ms per second of audio of one stream,
# T1 the p99 time to first audio of a lone request (ms), U the longest
# unit of work a turn holds (ms, default 75: the talker's longest built-in
# sentence), K the factor by which the processor-sharing formula
# underestimated the p99 measured on 2 cores (default 2.5; 1 core
# takes 1, where it overestimated). It prints the load, the streams and
# the slots
# (replicas x max_inflight per stage) under processor sharing, and under
# priority to first audio (earliest deadline first); the load stops at 0.9.
size() {
	awk -v r="$1" -v t1="$2" -v T="$3" -v U="${4:-75}" -v K="${5:-2.5}" '
	function erlangc(n, a,   i, term, sum, top) { # P(all n busy) in M/M/n at load a
		term = 1; sum = 0
		for (i = 0; i < n; i++) { sum += term; term *= a / (i + 1) }
		top = term * n / (n - a)
		return top / (sum + top)
	}
	function slots(n, a,   i, p, cdf, total, rho) { # 99.9th percentile of requests in system
		rho = a / n; p = 1; total = 0
		for (i = 0; i < n; i++) { total += p; p *= a / (i + 1) }
		total += p / (1 - rho)
		p = 1; cdf = 0
		for (i = 0; ; i++) {
			cdf += p / total
			if (cdf >= 0.999) return i
			p *= (i < n) ? a / (i + 1) : rho
		}
	}
	function ps(n, rho) { return t1 * (n > 1 ? K : 1) * (1 + erlangc(n, n * rho) / (n * (1 - rho))) }
	function edf(n, rho,   c, q) {
		c = erlangc(n, n * rho)
		if (c <= 0.01) return t1
		q = 0.01 / c
		return t1 + U * (1 - q ^ (1 / n))
	}
	BEGIN {
		printf "cores\tPS load\tPS streams\tPS slots\tEDF load\tEDF streams\tEDF slots\n"
		for (n = 1; n <= 64; n *= 2) {
			best_ps = 0; best_edf = 0
			for (rho = 0.01; rho < 0.905; rho += 0.01) {
				if (ps(n, rho) <= T) best_ps = rho
				if (edf(n, rho) <= T) best_edf = rho
			}
			printf "%d\t%.2f\t%d\t%d\t%.2f\t%d\t%d\n", n, best_ps, best_ps * n * 1000 / r, best_ps ? slots(n, n * best_ps) : 0, \
				best_edf, best_edf * n * 1000 / r, best_edf ? slots(n, n * best_edf) : 0
		}
	}'
}

case ${1:-} in
stages) shift; stages "$@" ;;
serve) load "$2" "$3" -c "$4" "$5" "${6:-}" "${7:-}" ;;
rate) load "$2" "$3" --rate "$4" "$5" "${6:-}" "${7:-}" ;;
formats) formats "$2" "$3" "$4" ;;
size) size "$2" "$3" "$4" "${5:-}" "${6:-}" ;;
*) sed -n '2,27p' "$0" >&2; exit 2 ;;
esac
