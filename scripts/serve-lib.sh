# serve-lib.sh, sourced by the load scripts: start_server NAME builds
# bin/omnistage, starts `omnistage serve` on an ephemeral loopback port,
# waits until it is ready and sets $addr and $server (its pid); the server
# is stopped when the script exits. NAME prefixes its error messages.
start_server() {
	local name=$1
	bin=bin/omnistage
	go build -o "$bin" ./cmd/omnistage
	serve_log=$(mktemp)
	"$bin" serve --addr 127.0.0.1:0 2>"$serve_log" &
	server=$!
	trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$serve_log"' EXIT
	addr=""
	for _ in $(seq 600); do
		addr=$(grep -o '"addr":"[0-9.:]*"' "$serve_log" | head -1 | cut -d'"' -f4) || true
		[ -n "$addr" ] && break
		sleep 0.1
	done
	[ -n "$addr" ] || { echo "$name: the server did not start:" >&2; cat "$serve_log" >&2; exit 1; }
	until curl -sf "http://$addr/ready" >/dev/null; do sleep 0.2; done
}
