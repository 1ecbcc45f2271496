package cli

// omnistage serve --wyoming: its flags, and the Wyoming server run beside
// the HTTP API over the same pipelines.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/wyoming"
)

// wyomingFlags are serve's Wyoming flags.
type wyomingFlags struct {
	addr     string // "": no Wyoming server
	insecure bool
	quiet    time.Duration
	peerList string
	peers    []netip.Prefix // nil: every peer
}

func (w *wyomingFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&w.addr, "wyoming", "", "also serve the Wyoming protocol's text-to-speech (Home Assistant's) on this address, such as 127.0.0.1:10200; it has no authentication and takes no API key (default: off)")
	fs.BoolVar(&w.insecure, "wyoming-insecure", false, "let --wyoming listen on an address beyond loopback, where whoever reaches it can make the server speak")
	fs.StringVar(&w.peerList, "wyoming-peers", "", "comma-separated networks whose connections --wyoming serves: CIDRs (192.168.1.0/24), loopback, private (RFC 1918 and 4193 networks, link-local: a home's LAN, a Docker network) or any; others get forbidden_peer (default: loopback, and private with --wyoming-insecure)")
	fs.DurationVar(&w.quiet, "wyoming-sentence-quiet", engine.DefaultSentenceQuiet, "a streamed text that ends in a full stop is spoken once no next piece came for this long (a full stop alone does not end a sentence: \"Dr. Smith\"); 0: the next word decides")
}

// check refuses what the Wyoming flags cannot do.
func (w *wyomingFlags) check(f *serveFlags) error {
	switch {
	case w.addr == "" && w.insecure:
		return errors.New("--wyoming-insecure needs --wyoming")
	case w.quiet < 0:
		return fmt.Errorf("--wyoming-sentence-quiet %s: want 0 or more", w.quiet)
	case w.addr == "" && w.peerList != "":
		return errors.New("--wyoming-peers needs --wyoming")
	case w.addr == "":
		return nil
	case f.stage != -1 || f.worker:
		return errors.New("--wyoming speaks with the pipelines of the HTTP API; a stage server (--stage) has none")
	case !w.insecure && !loopbackOnly(w.addr):
		return fmt.Errorf("--wyoming %s reaches beyond this machine, and the Wyoming protocol has no authentication: anyone who reaches the port could make the server speak. Listen on loopback (127.0.0.1:10200) and reach it through a tunnel, or, on a network you trust, pass --wyoming-insecure", w.addr)
	}
	list := w.peerList
	if list == "" {
		list = "loopback"
		if w.insecure {
			list = "loopback,private"
		}
	}
	peers, err := parsePeers(list)
	if err != nil {
		return fmt.Errorf("--wyoming-peers: %w", err)
	}
	w.peers = peers
	return nil
}

// peerNetworks are the networks --wyoming-peers names by word.
var peerNetworks = map[string][]string{
	"loopback": {"127.0.0.0/8", "::1/128"},
	"private":  {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "169.254.0.0/16", "fe80::/10"},
}

// parsePeers parses --wyoming-peers: nil for any.
func parsePeers(list string) ([]netip.Prefix, error) {
	var peers []netip.Prefix
	for _, item := range commaList(list) {
		if item == "any" {
			return nil, nil
		}
		cidrs, named := peerNetworks[item]
		if !named {
			cidrs = []string{item}
		}
		for _, c := range cidrs {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				return nil, fmt.Errorf("%q is no network: want a CIDR (192.168.1.0/24), loopback, private or any", item)
			}
			peers = append(peers, p.Masked())
		}
	}
	if len(peers) == 0 {
		return nil, errors.New("no network: want CIDRs, loopback, private or any")
	}
	return peers, nil
}

// wyomingRun is a Wyoming server about to run.
type wyomingRun struct {
	srv *wyoming.Server
	ln  net.Listener
}

// listenWyoming builds the Wyoming server of rt's pipelines and listens
// on its address; nil without --wyoming.
func (rt *server) listenWyoming(f *serveFlags) (*wyomingRun, error) {
	if f.wyoming.addr == "" {
		return nil, nil
	}
	quiet := f.wyoming.quiet
	if quiet == 0 {
		quiet = -1 // wyoming.Options: never
	}
	srv, err := wyoming.New(rt.orchs, wyoming.Options{DefaultModel: f.defaultModel, Logger: rt.log, Registerer: rt.reg,
		ShutdownTimeout: f.shutdownTimeout, SentenceQuiet: quiet, Peers: f.wyoming.peers, LiveShare: f.live.share})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", f.wyoming.addr)
	if err != nil {
		return nil, err
	}
	if f.apiKeyFile != "" {
		rt.log.Warn("the Wyoming server takes no API key: whoever reaches " + f.wyoming.addr + " can make the server speak")
	}
	return &wyomingRun{srv: srv, ln: ln}, nil
}

// run runs serve (the HTTP API, until ctx ends) with the Wyoming server
// beside it, when there is one: both stop when ctx ends, each draining
// its own requests; a Wyoming server that fails stops serve too.
func (w *wyomingRun) run(ctx context.Context, env Env, serve func(context.Context) int) int {
	if w == nil {
		return serve(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		err := w.srv.Run(ctx, w.ln)
		if err != nil {
			cancel()
		}
		done <- err
	}()
	status := serve(ctx)
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintf(env.Stderr, "omnistage serve: --wyoming: %v\n", err)
		return ExitFailure
	}
	return status
}
