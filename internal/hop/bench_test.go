package hop_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/api/apitest"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/hop"
	"github.com/omnistage/omnistage/internal/hop/hoptest"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/orchestrator/orchtest"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/placement/remote"
	"github.com/omnistage/omnistage/internal/pool"
	"github.com/omnistage/omnistage/internal/testkit"
)

// hopBench is two text stages: stage 0 makes chunks of about 3 KB (as
// many bytes as 100 ms of 16 kHz audio) of one input, stage 1 passes
// them through; deploy places stage 1.
const hopBench = `
pipeline:
  name: hopbench
  input: text
  stages:
    - {id: 0, name: source, engine: test-a, input: text, output: text}
    - {id: 1, name: pass, engine: test-b, input: text, output: text, final_output: true}
deploy:
  max_inflight: 64
  stages:
    - {id: 0, options: {chunks: %d}}
%s
`

// BenchmarkHop measures what a streamed hop costs: the same request (1 or
// 64 chunks of about 3 KB through a pass-through stage) with the stage in
// process and on a stage server over loopback, signed and unsigned, and,
// for comparison, over h2c. The
// hop's cost per request is the chunks=1 difference between remote and
// inproc; its cost per chunk is the chunks=64 difference less that, over
// 63.
func BenchmarkHop(b *testing.B) {
	signed := payload.NewCodec([]byte("hop-benchmark-key-0123456789"))
	unsigned := payload.NewCodec(nil)
	server := testkit.Parse(b, fmt.Sprintf(hopBench, 1, "    - {id: 1, max_inflight: 64, options: {passthrough: true}}"))
	stage := 1
	url := apitest.Start(b, server, orchestrator.Options{Registry: hoptest.Registry(nil)}, api.Options{Stage: &stage, Codec: signed}).URL
	unsignedURL := apitest.Start(b, server, orchestrator.Options{Registry: hoptest.Registry(nil)}, api.Options{Stage: &stage, Codec: unsigned}).URL
	text := strings.Repeat("x", 3200)
	// h2c is the transport the hop did not choose (see the package
	// documentation), measured for comparison.
	h2c := hop.NewHTTPClient()
	h2c.Transport.(*http.Transport).Protocols = new(http.Protocols)
	h2c.Transport.(*http.Transport).Protocols.SetUnencryptedHTTP2(true)
	remoteDeploy := "    - {id: 1, placement: remote, max_inflight: 64, endpoints: [%q], options: {passthrough: true}}"
	for _, tc := range []struct {
		name, deploy string
		codec        *payload.Codec
		client       *http.Client
	}{
		{"inproc", "    - {id: 1, max_inflight: 64, options: {passthrough: true}}", signed, nil},
		{"remote", fmt.Sprintf(remoteDeploy, url), signed, nil},
		{"remote-unsigned", fmt.Sprintf(remoteDeploy, unsignedURL), unsigned, nil},
		{"remote-h2c", fmt.Sprintf(remoteDeploy, url), signed, h2c},
	} {
		for _, chunks := range []int{1, 64} {
			cfg := testkit.Parse(b, fmt.Sprintf(hopBench, chunks, tc.deploy))
			var place orchestrator.Placement = &remote.Placement{Pipeline: cfg, Codec: tc.codec}
			if tc.client != nil {
				place = clientPlacement{cfg: cfg, client: tc.client, codec: tc.codec}
			}
			o := orchtest.Start(b, cfg, orchestrator.Options{Registry: hoptest.Registry(nil),
				Placements: map[pipeline.Placement]orchestrator.Placement{pipeline.PlacementRemote: place}}, 10*time.Second)
			b.Run(fmt.Sprintf("%s/chunks=%d", tc.name, chunks), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					s, err := o.Submit(context.Background(), orchestrator.Request{Prompt: engine.Prompt{Text: text}})
					if err != nil {
						b.Fatal(err)
					}
					res, err := s.Collect(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					if len(res[0].Chunks) != chunks {
						b.Fatalf("%d chunks", len(res[0].Chunks))
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*chunks), "ns/chunk")
			})
		}
	}
}

// clientPlacement is the remote placement of a stage with one endpoint,
// called over client.
type clientPlacement struct {
	cfg    *pipeline.Config
	client *http.Client
	codec  *payload.Codec
}

func (p clientPlacement) Supervise(spec engine.Spec, d *pipeline.DeployStage, cfg pool.Config) (*pool.Supervisor, error) {
	cfg.Replicas = 1
	return pool.Supervise(cfg, func(int) (engine.Engine, error) {
		return remote.New(remote.Config{Stage: spec, Pipeline: p.cfg, Endpoint: d.Endpoints[0], Client: &hop.Client{HTTP: p.client}, Codec: p.codec, Link: d.Link})
	})
}
