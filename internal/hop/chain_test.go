package runclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/api"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engines/flite"
	"github.com/omnistage/omnistage/internal/engines/sphinx"
	"github.com/omnistage/omnistage/internal/orchestrator"
	"github.com/omnistage/omnistage/internal/payload"
	"github.com/omnistage/omnistage/internal/pipeline"
	"github.com/omnistage/omnistage/internal/runclient"
	"github.com/omnistage/omnistage/internal/wire"
)

// startServer runs the real HTTP API over the built-in tts pipeline with
// the real engines: the full server when stage is nil, else the headless
// server of that stage. It returns the base URL once the server is ready.
func startServer(t *testing.T, stage *int, key string) string {
	t.Helper()
	cfg, err := pipeline.Builtin("tts")
	if err != nil {
		t.Fatal(err)
	}
	reg := &engine.Registry{}
	flite.Register(reg)
	sphinx.Register(reg)
	orch, err := orchestrator.New(cfg, orchestrator.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(orch, api.Options{Stage: stage, Codec: payload.NewCodec([]byte(key)), ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	url := "http://" + ln.Addr().String()
	c := &runclient.Client{}
	deadline := time.Now().Add(2 * time.Minute)
	for c.Probe(ctx, url, "/ready") != nil {
		if time.Now().After(deadline) {
			t.Fatal("server not ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return url
}

// TestChainMatchesGenerate drives three headless stage servers (talker,
// vocoder, aligner) with Chain and checks that the answer is the one a
// single server gives to /v1/generate.
func TestChainMatchesGenerate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four servers with the real engines")
	}
	const key = "e2e-payload-key-0123456789"
	full := startServer(t, nil, "")
	stages := map[int][]string{}
	for id := range 3 {
		stages[id] = []string{startServer(t, &id, key)}
	}
	const text = "Stage servers keep no state between calls."
	params := []json.RawMessage{json.RawMessage(`{"voice":"slt","speed":1.2}`), nil, nil}
	modalities := []string{"audio", "timestamps"}

	body, _ := json.Marshal(wire.GenerateRequest{Input: &wire.Input{Text: text}, OutputModalities: modalities, SamplingParams: params})
	resp, err := http.Post(full+"/v1/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/v1/generate: %d %s", resp.StatusCode, data)
	}
	var gen wire.GenerateResponse
	if err := json.Unmarshal(data, &gen); err != nil {
		t.Fatal(err)
	}
	var want wire.Output
	for _, o := range gen.Outputs {
		if o.Audio != nil {
			want.Audio = o.Audio
		}
		if o.Timestamps != nil {
			want.Timestamps = o.Timestamps
		}
	}
	if want.Audio == nil || len(want.Timestamps) == 0 {
		t.Fatalf("/v1/generate answered %s", data)
	}

	var hops []runclient.Hop
	chain := &runclient.Chain{Client: &runclient.Client{}, Stages: stages, OnHop: func(h runclient.Hop) { hops = append(hops, h) }}
	zero := 0
	input, _ := json.Marshal(wire.Prompt{Text: text})
	got, err := chain.Run(context.Background(), &wire.RunRequest{StageID: &zero, StageInput: input, SamplingParams: params, OutputModalities: modalities})
	if err != nil {
		t.Fatal(err)
	}
	if len(hops) != 3 || !got.Finished || got.StageID != 2 {
		t.Fatalf("answer %+v after %d hops", got, len(hops))
	}
	if !bytes.Equal(got.Output.Audio.Data, want.Audio.Data) || got.Output.Audio.SampleRate != want.Audio.SampleRate {
		t.Errorf("audio differs from /v1/generate's: %d bytes at %d Hz, want %d bytes at %d Hz",
			len(got.Output.Audio.Data), got.Output.Audio.SampleRate, len(want.Audio.Data), want.Audio.SampleRate)
	}
	if !reflect.DeepEqual(got.Output.Timestamps, want.Timestamps) {
		t.Errorf("timestamps %v, want %v", got.Output.Timestamps, want.Timestamps)
	}
	for _, h := range hops {
		t.Logf("stage %d: %s, sent %d B, received %d B", h.Stage, h.Duration.Round(time.Millisecond), h.RequestBytes, h.ResponseBytes)
	}

	// A payload for the vocoder posted to the aligner's server is refused
	// with a 4xx that names the problem, and nothing is retried.
	first, err := (&runclient.Client{}).Run(context.Background(), stages[0][0], &wire.RunRequest{StageID: &zero, StageInput: input})
	if err != nil {
		t.Fatal(err)
	}
	wrong := &runclient.Chain{Stages: map[int][]string{1: stages[2]}}
	_, err = wrong.Run(context.Background(), &wire.RunRequest{StageID: &first.StageID, StageInput: quote(first.StageInput)})
	var he *runclient.HTTPError
	if !errors.As(err, &he) || he.Status != 400 || runclient.Retryable(err) {
		t.Fatalf("payload to the wrong server: %v", err)
	}
}

func quote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
