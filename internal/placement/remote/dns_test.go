package remote_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/testengine"
	"github.com/omnistage/omnistage/internal/httperr"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/placement/remote"
	"github.com/omnistage/omnistage/internal/testkit"
)

// fakeDNS answers lookups of one name with the addresses the test sets.
type fakeDNS struct {
	name string

	mu    sync.Mutex
	addrs []string
}

func (d *fakeDNS) set(addrs ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs = addrs
}

func (d *fakeDNS) lookup(_ context.Context, host string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if host != d.name || len(d.addrs) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return slices.Clone(d.addrs), nil
}

// countingServer is a stage server whose engine counts its calls and can
// hold them at a gate.
type countingServer struct {
	calls atomic.Int32
	gate  chan struct{} // a call waits for it to close, when not nil
}

func (c *countingServer) register(r *engine.Registry) {
	testengine.Register(r, &testengine.Hooks{Process: func(ctx context.Context, _ *testengine.Engine, _ *engine.Job) error {
		c.calls.Add(1)
		if c.gate == nil {
			return nil
		}
		select {
		case <-c.gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}, testEngines...)
}

// listenSamePort listens on the same free port of each loopback address:
// several hosts behind one name and port.
func listenSamePort(t *testing.T, hosts ...string) []net.Listener {
	t.Helper()
	for range 20 {
		first, err := net.Listen("tcp", net.JoinHostPort(hosts[0], "0"))
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(first.Addr().String())
		lns := []net.Listener{first}
		for _, h := range hosts[1:] {
			ln, err := net.Listen("tcp", net.JoinHostPort(h, port))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		if len(lns) == len(hosts) {
			return lns
		}
		for _, ln := range lns {
			ln.Close()
		}
	}
	t.Fatalf("no port free on all of %v", hosts)
	return nil
}

// gaugeValue returns the value of gauge name for stage id in reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string, id int) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "stage" && l.GetValue() == fmt.Sprint(id) {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s for stage %d", name, id)
	return 0
}

// TestReplicasFromDNS checks that a remote stage has one replica per
// address its endpoint's name resolves to, and follows the name: a new
// address joins, a vanished one takes no new request but finishes the one
// it has, and a name with no address leaves the stage unavailable, naming
// it, until addresses come back.
func TestReplicasFromDNS(t *testing.T) {
	const key = "dns-key-0123456789"
	hosts := []string{"127.0.0.2", "127.0.0.3"}
	lns := listenSamePort(t, hosts...)
	_, port, _ := net.SplitHostPort(lns[0].Addr().String())
	servers := make([]*countingServer, len(hosts))
	gate := make(chan struct{})
	for i, ln := range lns {
		servers[i] = &countingServer{gate: gate}
		startStageServerOn(t, ln, fmt.Sprintf(textPipeline, inprocDeploy), 1, key, servers[i].register, "vocoder.test")
	}
	dns := &fakeDNS{name: "vocoder.test"}
	dns.set(hosts...)

	yaml := fmt.Sprintf(textPipeline, fmt.Sprintf(`
    - {id: 0, options: {chunks: 2}}
    - {id: 1, placement: remote, endpoints: ["http://vocoder.test:%s"], resolve_interval: 10ms, max_inflight: 1}
    - {id: 2}
`, port))
	cfg := testkit.Parse(t, yaml)
	reg := prometheus.NewRegistry()
	o := orchtest.Start(t, cfg, orchestrator.Options{
		Registry: engineRegistry(), Registerer: reg,
		Placements: placements(&remote.Placement{Pipeline: cfg, Codec: payload.NewCodec([]byte(key)), LookupHost: dns.lookup}),
	}, 10*time.Second)
	if n := gaugeValue(t, reg, "omnistage_stage_replicas", 1); n != 2 {
		t.Fatalf("%v replicas for a name with two addresses, want 2", n)
	}

	// Two requests at once, one replica each (max_inflight 1): both hosts
	// take traffic.
	run := func() chan error {
		done := make(chan error, 1)
		go func() {
			_, err := generate(o, orchestrator.Request{Prompt: engine.Prompt{Text: "hi"}})
			done <- err
		}()
		return done
	}
	first, second := run(), run()
	testkit.Eventually(t, "a call on each host", func() bool {
		return servers[0].calls.Load() == 1 && servers[1].calls.Load() == 1
	})

	// The second address vanishes while its replica has a request: the
	// replica leaves the stage but finishes that request.
	dns.set(hosts[0])
	testkit.Eventually(t, "one replica left", func() bool { return gaugeValue(t, reg, "omnistage_stage_replicas", 1) == 1 })
	close(gate)
	for _, done := range []chan error{first, second} {
		if err := <-done; err != nil {
			t.Fatalf("a request bound before its replica's address vanished: %v", err)
		}
	}
	for range 3 {
		if _, err := generate(o, orchestrator.Request{Prompt: engine.Prompt{Text: "hi"}}); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := servers[0].calls.Load(), servers[1].calls.Load(); a != 4 || b != 1 {
		t.Fatalf("calls after the second address vanished: %d and %d, want 4 and 1", a, b)
	}

	// No address at all: unavailable and not ready, naming the name.
	dns.set()
	testkit.Eventually(t, "no replica left", func() bool { return gaugeValue(t, reg, "omnistage_stage_replicas", 1) == 0 })
	_, err := generate(o, orchestrator.Request{Prompt: engine.Prompt{Text: "hi"}})
	if orchestrator.CodeOf(err) != orchestrator.CodeUnavailable || !strings.Contains(fmt.Sprint(err), "vocoder.test resolves to no address") {
		t.Fatalf("request with no address for the stage: %v (code %s), want unavailable naming vocoder.test", err, orchestrator.CodeOf(err))
	}
	if err := o.NotReady(); err == nil || !strings.Contains(err.Error(), "vocoder.test resolves to no address") {
		t.Fatalf("NotReady with no address for the stage: %v", err)
	}

	// Both come back, and take requests again.
	dns.set(hosts...)
	testkit.Eventually(t, "two replicas again", func() bool { return gaugeValue(t, reg, "omnistage_stage_replicas", 1) == 2 })
	if err := o.NotReady(); err != nil {
		t.Fatal(err)
	}
	if _, err := generate(o, orchestrator.Request{Prompt: engine.Prompt{Text: "hi"}}); err != nil {
		t.Fatal(err)
	}
}

func engineRegistry() *engine.Registry {
	r := &engine.Registry{}
	registerTestEngines(r)
	return r
}

// TestHostNotAllowed: stage servers on loopback addresses behind one name
// (several /etc/hosts lines) that do not answer to it (no --allowed-hosts)
// refuse the calls, 403 forbidden_host; the front end's answer is then a
// 502 with that code and the stage server's message, never a 500. With
// the name allowed, they serve.
func TestHostNotAllowed(t *testing.T) {
	for _, allowed := range []bool{false, true} {
		lns := listenSamePort(t, "127.0.0.2", "127.0.0.3")
		_, port, _ := net.SplitHostPort(lns[0].Addr().String())
		var hosts []string
		if allowed {
			hosts = []string{"vocoder.test"}
		}
		for _, ln := range lns {
			startStageServerOn(t, ln, fmt.Sprintf(textPipeline, inprocDeploy), 1, "", registerTestEngines, hosts...)
		}
		dns := &fakeDNS{name: "vocoder.test"}
		dns.set("127.0.0.2", "127.0.0.3")
		cfg := testkit.Parse(t, fmt.Sprintf(textPipeline, fmt.Sprintf(
			"    - {id: 0}\n    - {id: 1, placement: remote, endpoints: [\"http://vocoder.test:%s\"]}\n    - {id: 2}\n", port)))
		o := orchtest.Start(t, cfg, orchestrator.Options{
			Registry: engineRegistry(), Placements: placements(&remote.Placement{Pipeline: cfg, Codec: payload.NewCodec(nil), LookupHost: dns.lookup}),
		}, 10*time.Second)
		_, err := generate(o, orchestrator.Request{Prompt: engine.Prompt{Text: "hi"}})
		if allowed {
			if err != nil {
				t.Fatalf("with the name allowed: %v", err)
			}
			continue
		}
		status, typ, code := httperr.Classify(err)
		if status != http.StatusBadGateway || typ != httperr.TypeServer || code != httperr.CodeForbiddenHost || !strings.Contains(err.Error(), "--allowed-hosts") {
			t.Fatalf("a stage server that refuses the name: %d %s %s: %v; want 502 %s %s naming --allowed-hosts", status, typ, code, err, httperr.TypeServer, httperr.CodeForbiddenHost)
		}
	}
}
