package deploy

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestChartRendersStages checks the settings of stage servers:
// autoscalers, and settings for one stage over the defaults.
func TestChartRendersStages(t *testing.T) {
	tts := route(t, "builtin:tts")
	runRenderCases(t, []renderCase{
		{
			name: "autoscaling",
			values: set("stages.vocoder.autoscaling.enabled", true, "stages.vocoder.autoscaling.maxReplicas", 6,
				"stages.vocoder.autoscaling.targetMemoryUtilizationPercentage", 70),
			want: one(tts),
			check: func(t *testing.T, m *manifests) {
				if got := slices.Sorted(maps.Keys(m.hpas)); !slices.Equal(got, []string{fullname + "-vocoder"}) {
					t.Fatalf("HorizontalPodAutoscalers %v; want only the vocoder's", got)
				}
				hpa := m.hpas[fullname+"-vocoder"]
				if ref := hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || m.deployments[ref.Name] == nil {
					t.Errorf("HorizontalPodAutoscaler %s scales %+v; want the vocoder's Deployment", hpa.Name, ref)
				}
				if hpa.Spec.MaxReplicas != 6 || hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas != 1 || len(hpa.Spec.Metrics) != 2 {
					t.Errorf("HorizontalPodAutoscaler %s: %d..%d replicas on %d metrics; want 1..6 on cpu and memory", hpa.Name, hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas, len(hpa.Spec.Metrics))
				}
				if r := m.deployments[fullname+"-vocoder"].Spec.Replicas; r != nil {
					t.Errorf("the autoscaled vocoder's Deployment sets replicas %d; it must leave them to the autoscaler", *r)
				}
				if r := m.deployments[fullname+"-talker"].Spec.Replicas; r == nil {
					t.Error("the talker's Deployment leaves replicas unset without an autoscaler")
				}
			},
		},
		{
			name:   "autoscaling every stage",
			values: set("stageDefaults.autoscaling.enabled", true),
			want:   one(tts),
			check: func(t *testing.T, m *manifests) {
				if len(m.hpas) != 3 {
					t.Errorf("HorizontalPodAutoscalers %v; want one per stage", slices.Sorted(maps.Keys(m.hpas)))
				}
			},
		},
		{
			name: "per-stage settings",
			values: set(
				"stages.vocoder.replicas", 3,
				"stages.vocoder.resources.limits", map[string]any{"cpu": "2", "memory": "2Gi"},
				"stages.vocoder.nodeSelector", map[string]any{"pool": "vocoders"},
				"stages.vocoder.tolerations", []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "vocoder", "effect": "NoSchedule"}},
				"stages.aligner.podDisruptionBudget.minAvailable", "50%",
				"stageDefaults.nodeSelector", map[string]any{"kubernetes.io/arch": "amd64"},
				"stages.talker.remote", map[string]any{"timeout": "30s", "warm_timeout": "5m"},
			),
			want: one(tts),
			check: func(t *testing.T, m *manifests) {
				v := m.deployments[fullname+"-vocoder"]
				spec := v.Spec.Template.Spec
				if *v.Spec.Replicas != 3 {
					t.Errorf("vocoder replicas %d; want 3", *v.Spec.Replicas)
				}
				if lim := spec.Containers[0].Resources.Limits; lim.Cpu().String() != "2" || lim.Memory().String() != "2Gi" {
					t.Errorf("vocoder limits %v; want cpu 2, memory 2Gi", lim)
				}
				if req := spec.Containers[0].Resources.Requests; req.Cpu().String() != "500m" {
					t.Errorf("vocoder requests %v; want the defaults' cpu 500m kept", req)
				}
				if want := map[string]string{"pool": "vocoders", "kubernetes.io/arch": "amd64"}; !maps.Equal(spec.NodeSelector, want) {
					t.Errorf("vocoder nodeSelector %v; want %v", spec.NodeSelector, want)
				}
				if len(spec.Tolerations) != 1 || spec.Tolerations[0].Value != "vocoder" {
					t.Errorf("vocoder tolerations %+v; want the dedicated=vocoder one", spec.Tolerations)
				}
				talker := m.deployments[fullname+"-talker"]
				if *talker.Spec.Replicas != 1 || len(talker.Spec.Template.Spec.Tolerations) != 0 || !maps.Equal(talker.Spec.Template.Spec.NodeSelector, map[string]string{"kubernetes.io/arch": "amd64"}) {
					t.Errorf("the talker got the vocoder's settings: %+v", talker.Spec)
				}
				if pdb := m.pdbs[fullname+"-aligner"]; pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.String() != "50%" || pdb.Spec.MaxUnavailable != nil {
					t.Errorf("aligner PodDisruptionBudget %+v; want minAvailable 50%% alone", pdb.Spec)
				}
				if !strings.Contains(m.configMaps[fullname+"-config"].Data["frontend.yaml"], "warm_timeout: 5m") {
					t.Error("stages.talker.remote did not reach the front end's config")
				}
			},
		},
	})
}

// TestChartRendersConfigs checks pipelines other than the default: a
// route that skips a stage, four stages, stage names that are no DNS
// labels.
func TestChartRendersConfigs(t *testing.T) {
	runRenderCases(t, []renderCase{
		{
			name:   "a skip route",
			values: set("config", readFile(t, "internal/pipeline/builtin/tts-raw.yaml")),
			want:   one(route(t, "builtin:tts-raw")),
			check: func(t *testing.T, m *manifests) {
				if _, ok := m.deployments[fullname+"-enhance"]; ok {
					t.Error("a stage server for enhance, which the route skips")
				}
			},
		},
		{
			name:   "four stages",
			values: set("config", readFile(t, "internal/pipeline/builtin/tts-24k.yaml"), "stages.enhance.replicas", 2),
			want:   one(route(t, "builtin:tts-24k")),
			check: func(t *testing.T, m *manifests) {
				if d := m.deployments[fullname+"-enhance"]; d == nil || *d.Spec.Replicas != 2 {
					t.Errorf("enhance Deployment %v; want 2 replicas", d)
				}
			},
		},
		{
			name:   "stage names that are no DNS labels",
			values: set("config", customConfig),
			want:   one(routeText(t, "custom.yaml", customConfig)),
			check: func(t *testing.T, m *manifests) {
				for _, name := range []string{"talker-v2", "vocoder-fast", "words"} {
					if m.services[fullname+"-"+name] == nil {
						t.Errorf("no Service %s-%s", fullname, name)
					}
				}
				if !strings.Contains(m.configMaps[fullname+"-config"].Data["frontend.yaml"], "max_inflight: 16") {
					t.Error("the config's deploy.max_inflight did not reach the front end's config")
				}
			},
		},
	})
}

// TestChartRefuses renders values the chart must refuse, with a message
// that says why.
func TestChartRefuses(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"a remote stage in config", set("config", "pipeline:\n  name: p\n  input: text\n  stages:\n    - {id: 0, name: t, engine: flite-talker, input: text, output: frames}\ndeploy:\n  stages:\n    - {id: 0, placement: remote, endpoints: [\"http://x:1\"]}\n"), "placement remote"},
		{"config that is not YAML", set("config", "pipeline: [\n"), "not YAML"},
		{"config without stages", set("config", "pipeline:\n  name: p\n"), "pipeline.stages"},
		{"a short key", set("keys.payload.value", "short"), "at least 16"},
		{"one secret key for both", set("keys.api.secretKey", "payload-key"), "must differ"},
		{"a misspelt value", set("stages.vocoder.replica", 2), "replica"},
		{"an unknown front-end deploy key", set("frontend.deploy.max_infligt", 2), "max_infligt"},
		{"a Kubernetes quantity as goMemLimit", set("stages.talker.goMemLimit", "1Gi"), "'1Gi' does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, tt.values, target{})
			if err == nil {
				t.Fatalf("the chart renders; want an error saying %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q; want it to say %q", err, tt.want)
			}
		})
	}
}

// TestChartConfigChecksum checks that a config change rolls exactly the
// pods whose config file changes.
func TestChartConfigChecksum(t *testing.T) {
	sums := func(m *manifests) map[string]string {
		out := map[string]string{}
		for name, d := range m.deployments {
			out[name] = d.Spec.Template.Annotations["checksum/config"]
		}
		return out
	}
	base := sums(mustRender(t, nil))
	if again := sums(mustRender(t, nil)); !maps.Equal(base, again) {
		t.Fatalf("two renders of the same values differ in checksums: %v, %v", base, again)
	}
	defaults := loadChart(t).Values["config"].(string)
	tests := []struct {
		name        string
		values      map[string]any
		rolls, stay []string
	}{
		{"a stage option", set("config", strings.Replace(defaults, "voice: slt", "voice: rms", 1)),
			[]string{"talker", "vocoder", "aligner"}, []string{""}},
		{"the pipeline", set("config", readFile(t, "internal/pipeline/builtin/tts-24k.yaml")),
			[]string{"", "talker", "vocoder", "aligner"}, nil},
		{"a front-end deploy key", set("frontend.deploy.max_inflight", 8),
			[]string{""}, []string{"talker", "vocoder", "aligner"}},
	}
	name := func(s string) string {
		if s == "" {
			return fullname
		}
		return fullname + "-" + s
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sums(mustRender(t, tt.values))
			for _, s := range tt.rolls {
				if got[name(s)] == base[name(s)] {
					t.Errorf("Deployment %s keeps checksum/config %s: its pods would not roll", name(s), got[name(s)])
				}
			}
			for _, s := range tt.stay {
				if got[name(s)] != base[name(s)] {
					t.Errorf("Deployment %s changes checksum/config, though its config file did not change", name(s))
				}
			}
		})
	}
}
