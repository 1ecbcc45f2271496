package deploy

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// customConfig is a pipeline whose stage names are no DNS labels as they
// stand, with a deploy section for the stage servers.
const customConfig = `pipeline:
  name: custom
  input: text
  stages:
    - {id: 0, name: Talker_v2, engine: flite-talker, input: text, output: frames}
    - {id: 1, name: vocoder.fast, engine: flite-vocoder, input: frames, output: audio, final_output: true}
  aligner: {engine: sphinx-aligner, name: Words}
deploy:
  max_inflight: 16
  stages:
    - {id: 1, replicas: 2, max_inflight: 4}
`

// renderCase is one render of the chart: values, what it must deploy
// (checkChart) and what else to check.
type renderCase struct {
	name   string
	values map[string]any
	want   want
	check  func(t *testing.T, m *manifests)
}

// runRenderCases renders each case as helm template does and checks it.
func runRenderCases(t *testing.T, cases []renderCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			m := mustRender(t, tt.values)
			checkChart(t, m, tt.want)
			if tt.check != nil {
				tt.check(t, m)
			}
		})
	}
}

// TestChartRenders checks the defaults (the built-in tts pipeline, one
// replica per stage), tracing and the name prefix.
func TestChartRenders(t *testing.T) {
	tts := route(t, "builtin:tts")
	runRenderCases(t, []renderCase{
		{
			name: "defaults",
			want: one(tts),
			check: func(t *testing.T, m *manifests) {
				for _, name := range []string{"talker", "vocoder", "aligner"} {
					d, ok := m.deployments[fullname+"-"+name]
					if !ok {
						t.Errorf("no Deployment %s-%s", fullname, name)
						continue
					}
					if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
						t.Errorf("Deployment %s: replicas %v; want 1", d.Name, d.Spec.Replicas)
					}
					if img := d.Spec.Template.Spec.Containers[0].Image; img != "omnistage:0.1.0" {
						t.Errorf("Deployment %s: image %s; want omnistage:<appVersion>", d.Name, img)
					}
				}
				if len(m.hpas) != 0 {
					t.Errorf("HorizontalPodAutoscalers %v by default; want none", slices.Sorted(maps.Keys(m.hpas)))
				}
				sec, ok := m.secrets[fullname+"-keys"]
				if !ok {
					t.Fatalf("no generated Secret %s-keys", fullname)
				}
				if p, a := sec.Data["payload-key"], sec.Data["api-key"]; string(p) == string(a) {
					t.Error("the generated payload key and API key are the same")
				}
				if cm := m.configMaps[fullname+"-config"]; !slices.Equal(slices.Sorted(maps.Keys(cm.Data)), []string{"frontend.yaml", "stage.yaml"}) {
					t.Errorf("ConfigMap %s holds %v; want frontend.yaml and stage.yaml, as before several pipelines", cm.Name, slices.Sorted(maps.Keys(cm.Data)))
				}
				for _, s := range []string{"port-forward svc/" + fullname, "pipeline tts ", "deployment/" + fullname + "-vocoder"} {
					if !strings.Contains(m.notes, s) {
						t.Errorf("NOTES.txt does not say %q:\n%s", s, m.notes)
					}
				}
			},
		},
		{
			name:   "tracing",
			values: map[string]any{"tracing": map[string]any{"otlpEndpoint": "http://collector:4318", "sampler": "parentbased_traceidratio", "samplerArg": "0.25"}},
			want:   one(tts),
			check: func(t *testing.T, m *manifests) {
				if len(m.deployments) != 4 {
					t.Errorf("%d Deployments; want 4", len(m.deployments))
				}
				for _, d := range m.deployments {
					env := map[string]string{}
					for _, e := range d.Spec.Template.Spec.Containers[0].Env {
						if strings.HasPrefix(e.Name, "OTEL_") {
							env[e.Name] = e.Value
						}
					}
					want := map[string]string{
						"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SERVICE_NAME": d.Name,
						"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
					}
					if !maps.Equal(env, want) {
						t.Errorf("Deployment %s: env %v; want %v", d.Name, env, want)
					}
				}
			},
		},
		{
			name:   "fullnameOverride",
			values: set("fullnameOverride", "speech"),
			want:   one(tts),
			check: func(t *testing.T, m *manifests) {
				if m.deployments["speech"] == nil || m.services["speech-vocoder"] == nil {
					t.Errorf("Deployments %v, Services %v; want speech and speech-vocoder", slices.Sorted(maps.Keys(m.deployments)), slices.Sorted(maps.Keys(m.services)))
				}
			},
		},
		{
			name:   "a default model",
			values: set("frontend.defaultModel", "tts"),
			want:   want{pipelines: []routeJSON{tts}, defaultModel: "tts"},
		},
		{
			name:   "the names clients call the front end by",
			values: set("frontend.allowedHosts", []any{"speech.example.com", ".internal.example"}),
			want:   one(tts),
			check: func(t *testing.T, m *manifests) {
				_, front := m.servers(t)
				for _, host := range []string{"speech.example.com", "api.internal.example"} {
					checkAnswersTo(t, front, host)
				}
			},
		},
	})
}

// TestChartRendersKeys checks where the keys come from: existing Secrets,
// a second payload key for a rotation, a key given as a value.
func TestChartRendersKeys(t *testing.T) {
	tts := route(t, "builtin:tts")
	runRenderCases(t, []renderCase{
		{
			name: "existing secret",
			values: set("keys.payload.existingSecret", "omni-keys",
				"keys.api.existingSecret", "omni-keys", "keys.api.secretKey", "token"),
			want: want{pipelines: []routeJSON{tts}, existingSecret: "omni-keys"},
			check: func(t *testing.T, m *manifests) {
				if len(m.secrets) != 0 {
					t.Errorf("Secrets %v rendered; with existing Secrets the chart makes none", slices.Sorted(maps.Keys(m.secrets)))
				}
				_, front := m.servers(t)
				if got := front.keyFile(t, "--api-key-file"); got != (secretRef{"omni-keys", "token"}) {
					t.Errorf("the API key comes from %v; want omni-keys/token", got)
				}
			},
		},
		{
			name:   "payload key rotation",
			values: set("keys.payloadAccepted.existingSecret", "omni-old", "keys.payloadAccepted.secretKey", "key"),
			want:   one(tts),
			check: func(t *testing.T, m *manifests) {
				stages, front := m.servers(t)
				for _, s := range append([]server{front}, slices.Collect(maps.Values(stages))...) {
					files := argValues(s.args, "--payload-key-file")
					if len(files) != 2 {
						t.Fatalf("Deployment %s: --payload-key-file %v; want the accepted key, then the signing key", s.d.Name, files)
					}
					if got := s.secretOf(t, files[0]); got != (secretRef{"omni-old", "key"}) {
						t.Errorf("Deployment %s: the accepted key comes from %v; want omni-old/key", s.d.Name, got)
					}
					if got := s.secretOf(t, files[1]); got != (secretRef{fullname + "-keys", "payload-key"}) {
						t.Errorf("Deployment %s: the signing key comes from %v; want the chart's Secret", s.d.Name, got)
					}
				}
			},
		},
		{
			name:   "existing API key secret, payload key given",
			values: set("keys.api.existingSecret", "omni-api", "keys.payload.value", "0123456789abcdef-payload"),
			want:   want{pipelines: []routeJSON{tts}, existingSecret: "omni-api"},
			check: func(t *testing.T, m *manifests) {
				sec := m.secrets[fullname+"-keys"]
				if sec == nil || len(sec.Data) != 1 || string(sec.Data["payload-key"]) != "0123456789abcdef-payload" {
					t.Errorf("the chart's Secret %v; want only the given payload key", sec)
				}
			},
		},
	})
}

// TestChartDefaultConfig: the chart's default config is the built-in tts
// pipeline, as values.yaml says, word for word.
func TestChartDefaultConfig(t *testing.T) {
	var values struct {
		Config string `json:"config"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "deploy/helm/omnistage/values.yaml")), &values); err != nil {
		t.Fatal(err)
	}
	if want := readFile(t, "internal/pipeline/builtin/tts.yaml"); values.Config != want {
		t.Errorf("values.yaml's config differs from internal/pipeline/builtin/tts.yaml:\n%s", values.Config)
	}
}
