package process

// The worker protocol, both sides. The parent starts
//
//	EXE serve --worker --stage N --config SOURCE --pipeline NAME --addr 127.0.0.1:0 [FLAGS]
//
// (FLAGS: the parent's choices the worker follows too, such as
// --turns=false) with two fresh random keys in the environment (never on the command
// line): keyfile.PayloadKeyEnv, which signs every hop between the two, and
// APIKeyEnv, the bearer token the parent calls with. The child (see
// ChildConfig, ChildAPIKey, WatchParent) builds one in-process replica of
// stage N, listens, and prints on its stdout one Announce line; its other
// output, and its stderr, are the parent's to show. The child stops when
// its stdin reaches end of file, which is how the parent stops it, and
// what happens when the parent dies, however it dies.

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/quote"
)

// APIKeyEnv is the environment variable in which a worker process gets the
// bearer token its parent calls it with.
const APIKeyEnv = "OMNISTAGE_WORKER_API_KEY"

// announcePrefix starts the first line a worker prints on its stdout.
const announcePrefix = "omnistage worker listening on "

// Announce writes the line with which a worker process tells its parent
// where it listens and which pipeline it loaded: "omnistage worker
// listening on ADDR digest HEX". The parent refuses a worker whose
// pipeline digest differs from its own (the config file changed in
// between).
func Announce(w io.Writer, addr net.Addr, cfg *pipeline.Config) error {
	d := cfg.Digest()
	_, err := fmt.Fprintf(w, "%s%s digest %s\n", announcePrefix, addr, hex.EncodeToString(d[:]))
	return err
}

// parseAnnounce reads an Announce line.
func parseAnnounce(line string) (addr string, digest [32]byte, err error) {
	rest, ok := strings.CutPrefix(line, announcePrefix)
	f := strings.Fields(rest)
	if !ok || len(f) != 3 || f[1] != "digest" {
		return "", digest, fmt.Errorf("the worker announced %q, not %q", quote.Short(line), announcePrefix+"ADDR digest HEX")
	}
	b, err := hex.DecodeString(f[2])
	if err != nil || len(b) != len(digest) {
		return "", digest, fmt.Errorf("the worker announced a malformed digest %q", f[2])
	}
	copy(digest[:], b)
	if _, _, err := net.SplitHostPort(f[0]); err != nil {
		return "", digest, fmt.Errorf("the worker announced a malformed address %q", f[0])
	}
	return f[0], digest, nil
}

// ChildConfig makes cfg that of the worker process of stage id: the one
// replica its parent started it for, in this process.
func ChildConfig(cfg *pipeline.Config, id int) error {
	n := len(cfg.Deploy.Stages)
	if id < 0 || id >= n {
		return fmt.Errorf("--stage must name one of the pipeline's stages, 0..%d", n-1)
	}
	d := &cfg.Deploy.Stages[id]
	d.Placement, d.Replicas, d.Endpoints = pipeline.PlacementInproc, 1, nil
	// The worker's engine keeps the bounds of its own programs (engine
	// external's timeout and warm_timeout); the rest of the link is the
	// parent's.
	d.Link = pipeline.Link{Timeout: d.Link.Timeout, WarmTimeout: d.Link.WarmTimeout}
	d.Worker = pipeline.Worker{}
	return nil
}

// ChildAPIKey returns the bearer token the parent passed: only the parent
// may call its worker.
func ChildAPIKey(getenv func(string) string) string {
	return strings.TrimSpace(getenv(APIKeyEnv))
}

// WatchParent returns a context that ends with ctx or when stdin reaches
// end of file: the parent stopped this worker, or died. A worker never
// outlives its parent.
func WatchParent(ctx context.Context, stdin io.Reader) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()
	return wctx, cancel
}
