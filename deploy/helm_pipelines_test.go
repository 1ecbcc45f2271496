package deploy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// builtinPipelines returns the value of pipelines for built-in pipelines,
// each with its config file.
func builtinPipelines(t *testing.T, names ...string) map[string]any {
	t.Helper()
	ps := map[string]any{}
	for _, name := range names {
		ps[name] = map[string]any{"config": readFile(t, "internal/pipeline/builtin/"+name+".yaml")}
	}
	return ps
}

// TestChartPipelines checks a release of several pipelines: stage servers
// of their own for each pipeline's stages, named after both, running
// serve --stage N --pipeline P on the pipeline's config; settings by stage
// name for every pipeline and for one; one front end serving them all.
func TestChartPipelines(t *testing.T) {
	three := builtinPipelines(t, "tts", "tts-24k", "tts-raw")
	three["tts-24k"].(map[string]any)["stages"] = map[string]any{"enhance": map[string]any{"autoscaling": map[string]any{"enabled": true}}}
	three["tts-raw"].(map[string]any)["stages"] = map[string]any{"vocoder": map[string]any{"replicas": 1}}
	runRenderCases(t, []renderCase{
		{
			name:   "three built-in pipelines",
			values: set("pipelines", three, "frontend.defaultModel", "tts-24k", "stages.vocoder.replicas", 2),
			want: want{
				pipelines:    []routeJSON{route(t, "builtin:tts"), route(t, "builtin:tts-24k"), route(t, "builtin:tts-raw")},
				defaultModel: "tts-24k",
			},
			check: checkThreePipelines,
		},
		{
			name:   "pipelines replace config",
			values: set("pipelines", builtinPipelines(t, "tts-24k"), "config", customConfig),
			want:   one(route(t, "builtin:tts-24k")),
			check: func(t *testing.T, m *manifests) {
				if got := slices.Sorted(maps.Keys(m.configMaps[fullname+"-config"].Data)); !slices.Equal(got, []string{"frontend-tts-24k.yaml", "stage-tts-24k.yaml"}) {
					t.Errorf("the ConfigMap holds %v; want tts-24k's two files alone", got)
				}
				if !strings.Contains(m.notes, "pipeline tts-24k ") || !strings.Contains(m.notes, "get tts-24k") {
					t.Errorf("NOTES.txt does not say tts-24k is served, and the default:\n%s", m.notes)
				}
			},
		},
		{
			name:   "stage names that are no DNS labels",
			values: set("pipelines", map[string]any{"Custom_1": map[string]any{"config": strings.Replace(customConfig, "name: custom", "name: Custom_1", 1)}}),
			want:   one(routeText(t, "custom.yaml", strings.Replace(customConfig, "name: custom", "name: Custom_1", 1))),
			check: func(t *testing.T, m *manifests) {
				for _, name := range []string{"talker-v2", "vocoder-fast", "words"} {
					if m.services[fullname+"-custom-1-"+name] == nil {
						t.Errorf("no Service %s-custom-1-%s", fullname, name)
					}
				}
			},
		},
	})
}

// checkThreePipelines checks the objects of tts, tts-24k and tts-raw in
// one release.
func checkThreePipelines(t *testing.T, m *manifests) {
	var want []string
	for _, s := range []string{"", "-tts-talker", "-tts-vocoder", "-tts-aligner", "-tts-24k-talker", "-tts-24k-vocoder",
		"-tts-24k-enhance", "-tts-24k-aligner", "-tts-raw-talker", "-tts-raw-vocoder", "-tts-raw-aligner"} {
		want = append(want, fullname+s)
	}
	slices.Sort(want)
	if got := slices.Sorted(maps.Keys(m.deployments)); !slices.Equal(got, want) {
		t.Errorf("Deployments %v; want %v", got, want)
	}
	stages, _ := m.servers(t)
	for k, s := range stages {
		config := "/etc/omnistage/config/stage-" + k.pipeline + ".yaml"
		if args := s.args[:7]; !slices.Equal(args, []string{"serve", "--stage", s.args[2], "--pipeline", k.pipeline, "--config", config}) {
			t.Errorf("Deployment %s runs %v; want serve --stage %d --pipeline %s --config %s", s.d.Name, args, k.id, k.pipeline, config)
		}
	}
	for name, replicas := range map[string]int32{"-tts-vocoder": 2, "-tts-24k-vocoder": 2, "-tts-raw-vocoder": 1, "-tts-raw-talker": 1} {
		if r := m.deployments[fullname+name].Spec.Replicas; r == nil || *r != replicas {
			t.Errorf("Deployment %s%s: replicas %v; want %d", fullname, name, r, replicas)
		}
	}
	if got := slices.Sorted(maps.Keys(m.hpas)); !slices.Equal(got, []string{fullname + "-tts-24k-enhance"}) {
		t.Errorf("HorizontalPodAutoscalers %v; want tts-24k's enhance alone", got)
	}
	if got := slices.Sorted(maps.Keys(m.pdbs)); !slices.Equal(got, want) {
		t.Errorf("PodDisruptionBudgets %v; want one per Deployment", got)
	}
	for _, s := range []string{"pipelines tts, tts-24k, tts-raw ", "get tts-24k", "tts-raw:\n", "deployment/" + fullname + "-tts-vocoder"} {
		if !strings.Contains(m.notes, s) {
			t.Errorf("NOTES.txt does not say %q:\n%s", s, m.notes)
		}
	}
}

// TestChartPipelinesRefuse renders pipelines the chart must refuse, with
// a message that says why.
func TestChartPipelinesRefuse(t *testing.T) {
	tts, tts24k := readFile(t, "internal/pipeline/builtin/tts.yaml"), readFile(t, "internal/pipeline/builtin/tts-24k.yaml")
	named := func(name string) map[string]any { // tts, named name
		return map[string]any{"config": strings.Replace(tts, "name: tts", "name: "+name, 1)}
	}
	tests := []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"a name that is not the pipeline's", set("pipelines", map[string]any{"speech": map[string]any{"config": tts}}),
			`pipelines.speech.config: the pipeline is named "tts", not "speech"`},
		{"several documents in one entry", set("pipelines", map[string]any{"tts": map[string]any{"config": tts + "---\n" + tts24k}}),
			"pipelines.tts.config: holds 2 YAML documents"},
		{"several documents in config", set("config", tts+"\n---\n"+tts24k), "config: holds 2 YAML documents; give each pipeline an entry of pipelines"},
		{"settings for a stage the pipeline lacks", set("pipelines", builtinPipelines(t, "tts"), "pipelines.tts.stages.enhance.replicas", 2),
			"pipelines.tts.stages.enhance: pipeline tts has no stage enhance (its stages: talker, vocoder, aligner)"},
		{"a default model not served", set("frontend.defaultModel", "tts-24k"), `frontend.defaultModel: "tts-24k" is none of the pipelines served (tts)`},
		{"two pipelines, one config file", set("pipelines", map[string]any{"a.b": named("a.b"), "a_b": named("a_b")}), "both get the config file stage-a-b.yaml"},
		{"two stages, one object name", set("pipelines", map[string]any{"x": map[string]any{"config": strings.Replace(named("x")["config"].(string), "name: talker", "name: y-talker", 1)}, "x-y": named("x-y")}),
			"stage y-talker of pipeline x and stage talker of pipeline x-y both get the object name " + fullname + "-x-y-talker"},
		{"an entry without config", set("pipelines", map[string]any{"tts": map[string]any{"stages": map[string]any{}}}), "missing property 'config'"},
		{"a misspelt key of an entry", set("pipelines", builtinPipelines(t, "tts"), "pipelines.tts.replicas", 2), "'replicas' not allowed"},
		{"a name no pipeline may have", set("pipelines", map[string]any{"tts 2": named("tts 2")}), "'tts 2' does not match"},
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

// TestChartServes runs every server a release of tts and tts-24k renders
// on this machine, as its Deployment runs it (its args, the ConfigMap and
// the keys where the pod mounts them, each Service's name made the
// loopback address of the server it selects), and checks that the front
// end serves both pipelines through the stage servers.
func TestChartServes(t *testing.T) {
	const apiKey = "0123456789abcdef-api"
	m := mustRender(t, set("pipelines", builtinPipelines(t, "tts", "tts-24k"), "frontend.defaultModel", "tts-24k",
		"keys.api.value", apiKey, "keys.payload.value", "0123456789abcdef-payload"))
	stages, front := m.servers(t)
	files := map[string]string{}
	for _, vm := range front.c.VolumeMounts {
		v, _ := front.mountedFile(t, vm.MountPath+"/x")
		switch {
		case v.ConfigMap != nil:
			for key, text := range m.configMaps[v.ConfigMap.Name].Data {
				files[vm.MountPath+"/"+key] = text
			}
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				for _, item := range src.Secret.Items {
					files[vm.MountPath+"/"+item.Path] = string(m.secrets[src.Secret.Name].Data[item.Key])
				}
			}
		}
	}
	servers := []localServer{{name: front.d.Name, args: front.args}}
	for _, s := range stages {
		ls := localServer{name: s.d.Name, args: s.args}
		for _, svc := range m.services {
			if selects(svc.Spec.Selector, s.podLabels) {
				ls.urls = append(ls.urls, fmt.Sprintf("http://%s.%s.svc.cluster.local:8080", svc.Name, namespace))
			}
		}
		servers = append(servers, ls)
	}
	checkServes(t, runLocally(t, files, servers), apiKey, "tts-24k")
}

// TestChartPipelinesChecksum checks that a change to one pipeline's config
// rolls exactly the pods whose config file changes: that pipeline's stage
// servers, and the front end when its file for the pipeline changes.
func TestChartPipelinesChecksum(t *testing.T) {
	values := func(edit func(ps map[string]any)) map[string]any {
		ps := builtinPipelines(t, "tts", "tts-24k")
		if edit != nil {
			edit(ps)
		}
		return set("pipelines", ps)
	}
	sums := func(m *manifests) map[string]string {
		out := map[string]string{}
		for name, d := range m.deployments {
			out[strings.TrimPrefix(strings.TrimPrefix(name, fullname), "-")] = d.Spec.Template.Annotations["checksum/config"]
		}
		return out
	}
	base := sums(mustRender(t, values(nil)))
	edit := func(name, old, new string) func(ps map[string]any) {
		return func(ps map[string]any) {
			p := ps[name].(map[string]any)
			p["config"] = strings.Replace(p["config"].(string), old, new, 1)
		}
	}
	tests := []struct {
		name  string
		edit  func(ps map[string]any)
		rolls []string
	}{
		{"a stage option of tts-24k", edit("tts-24k", "sample_rate: 24000", "sample_rate: 22050"),
			[]string{"tts-24k-talker", "tts-24k-vocoder", "tts-24k-enhance", "tts-24k-aligner"}},
		{"a front-end deploy key of tts", edit("tts", "deploy:\n", "deploy:\n  max_inflight: 8\n"),
			[]string{"", "tts-talker", "tts-vocoder", "tts-aligner"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sums(mustRender(t, values(tt.edit)))
			for name, sum := range got {
				if rolls := slices.Contains(tt.rolls, name); rolls != (sum != base[name]) {
					t.Errorf("Deployment %q: checksum/config changed: %t; want %t", name, sum != base[name], rolls)
				}
			}
		})
	}
}
