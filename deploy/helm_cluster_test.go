package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// fakeCluster is a ClientProvider over a fake dynamic client, for the
// chart's lookup calls: Secrets and Services.
type fakeCluster struct{ client dynamic.Interface }

// fakeResources are the kinds a fakeCluster holds.
var fakeResources = map[string]schema.GroupVersionResource{
	"Secret":  {Version: "v1", Resource: "secrets"},
	"Service": {Version: "v1", Resource: "services"},
}

// newFakeCluster returns a fakeCluster holding objs.
func newFakeCluster(objs ...runtime.Object) fakeCluster {
	lists := map[schema.GroupVersionResource]string{}
	for kind, gvr := range fakeResources {
		lists[gvr] = kind + "List"
	}
	return fakeCluster{dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists, objs...)}
}

func (c fakeCluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gvr, ok := fakeResources[kind]
	if apiVersion != "v1" || !ok {
		return nil, false, fmt.Errorf("fake cluster: no %s %s", apiVersion, kind)
	}
	return c.client.Resource(gvr), true, nil
}

// TestChartKubeVersion checks that the chart renders with Helm's default
// capabilities (helm template, helm lint) and for Kubernetes 1.25 and
// newer, and refuses an older Kubernetes when the version is the
// cluster's or one given with --kube-version.
func TestChartKubeVersion(t *testing.T) {
	tests := []struct {
		name string
		to   target
		want string // "": renders
	}{
		{"helm template", target{}, ""},
		{"helm template --kube-version 1.25", target{kubeVersion: "v1.25.0"}, ""},
		{"helm template --kube-version 1.24", target{kubeVersion: "v1.24.0"}, "needs Kubernetes 1.25 or newer; this is v1.24.0"},
		{"install on 1.33", target{kubeVersion: "v1.33.1", cluster: newFakeCluster()}, ""},
		{"install on 1.25 from a vendor", target{kubeVersion: "v1.25.16-eks-59bf375", cluster: newFakeCluster()}, ""},
		{"install on 1.24", target{kubeVersion: "v1.24.17-gke.2113000", cluster: newFakeCluster()}, "this is v1.24.17-gke.2113000"},
		{"install on 1.20.0", target{kubeVersion: "v1.20.0", cluster: newFakeCluster()}, "needs Kubernetes 1.25 or newer; this is v1.20.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, nil, tt.to)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("the chart does not render: %v", err)
			case tt.want != "" && err == nil:
				t.Errorf("the chart renders; want an error saying %q", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %q; want it to say %q", err, tt.want)
			}
		})
	}
}

// TestChartTemplateNoFlags renders the chart as `helm template omnistage
// deploy/helm/omnistage` does: Helm's default capabilities (Kubernetes
// v1.20.0), the default namespace, no values.
func TestChartTemplateNoFlags(t *testing.T) {
	m, err := render(t, nil, target{release: "omnistage", namespace: "default"})
	if err != nil {
		t.Fatalf("helm template omnistage deploy/helm/omnistage: %v", err)
	}
	for _, name := range []string{"omnistage", "omnistage-talker", "omnistage-vocoder", "omnistage-aligner"} {
		if m.deployments[name] == nil || m.services[name] == nil {
			t.Errorf("no Deployment and Service %s", name)
		}
	}
	if !strings.Contains(m.configMaps["omnistage-config"].Data["frontend.yaml"], "http://omnistage-vocoder.default.svc.cluster.local:8080") {
		t.Error("the front end's config does not place the vocoder at its Service in the default namespace")
	}
}

// TestChartLint runs helm lint's checks on the chart as `helm lint
// deploy/helm/omnistage` does (no flags: no values, the default
// namespace, Helm's default Kubernetes version) and on variants, and
// fails on any warning or error.
func TestChartLint(t *testing.T) {
	for _, values := range []map[string]any{
		nil,
		set("stageDefaults.autoscaling.enabled", true, "networkPolicy.enabled", false),
		set("pipelines", builtinPipelines(t, "tts", "tts-24k"), "frontend.defaultModel", "tts-24k"),
	} {
		res := lint.All(chartDir, values, "default", false)
		msgs := slices.Clone(res.Messages)
		sort.Slice(msgs, func(i, j int) bool { return msgs[i].Severity > msgs[j].Severity })
		for _, msg := range msgs {
			if msg.Severity >= support.WarningSev {
				t.Errorf("helm lint (values %v): %s", values, msg)
			} else {
				t.Logf("helm lint: %s", msg)
			}
		}
	}
}

// TestChartKeepsKeys checks that an upgrade keeps the keys the chart
// generated at install, which lookup finds in the cluster, and that an
// install generates new ones.
func TestChartKeepsKeys(t *testing.T) {
	existing := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata":   map[string]any{"name": fullname + "-keys", "namespace": namespace},
		"data": map[string]any{
			"payload-key": "a2VwdC1wYXlsb2FkLWtleS0wMTIzNDU2Nzg5", // kept-payload-key-0123456789
			"api-key":     "a2VwdC1hcGkta2V5LTAxMjM0NTY3ODk=",     // kept-api-key-0123456789
		},
	}}
	m, err := render(t, nil, target{kubeVersion: "v1.33.1", cluster: newFakeCluster(existing)})
	if err != nil {
		t.Fatal(err)
	}
	sec := m.secrets[fullname+"-keys"]
	if sec == nil {
		t.Fatal("no Secret rendered")
	}
	for key, want := range map[string]string{"payload-key": "kept-payload-key-0123456789", "api-key": "kept-api-key-0123456789"} {
		if got := string(sec.Data[key]); got != want {
			t.Errorf("upgrade: %s %q; want the cluster's %q kept", key, got, want)
		}
	}

	first, second := mustRender(t, nil).secrets[fullname+"-keys"], mustRender(t, nil).secrets[fullname+"-keys"]
	if string(first.Data["payload-key"]) == string(second.Data["payload-key"]) {
		t.Error("two installs generate the same payload key")
	}
}

// TestChartGoMemLimit checks each server's GOMEMLIMIT as the kubelet
// makes it from its memory limit, and what Go reads in it: by default 95%
// of the limit; none without a limit; goMemLimit as given.
func TestChartGoMemLimit(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]any
		want   map[string]string // Deployment suffix ("" for the front end) -> GOMEMLIMIT as the kubelet sets it; absent: none
	}{
		{"defaults", nil, map[string]string{"": "512000000", "-talker": "1024000000", "-vocoder": "1024000000", "-aligner": "1024000000"}},
		{"limits by stage", set("stages.vocoder.resources.limits", map[string]any{"memory": "1G", "cpu": "2"}, "stages.talker.resources.limits", map[string]any{"memory": "1536Mi"}),
			map[string]string{"": "512000000", "-talker": "1536000000", "-vocoder": "954000000", "-aligner": "1024000000"}},
		{"no limit", set("frontend.resources.limits", nil, "stages.aligner.resources.limits", nil),
			map[string]string{"-talker": "1024000000", "-vocoder": "1024000000"}},
		{"goMemLimit given", set("stages.talker.goMemLimit", "700MiB", "frontend.goMemLimit", "off", "stages.aligner.resources.limits", nil, "stages.aligner.goMemLimit", "300000000"),
			map[string]string{"": "off", "-talker": "700MiB", "-vocoder": "1024000000", "-aligner": "300000000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustRender(t, tt.values)
			checkChart(t, m, one(route(t, "builtin:tts")))
			for _, suffix := range []string{"", "-talker", "-vocoder", "-aligner"} {
				c := m.deployments[fullname+suffix].Spec.Template.Spec.Containers[0]
				env, _ := containerEnv(t, c)
				got, ok := env["GOMEMLIMIT"]
				want, wantOK := tt.want[suffix]
				if got != want || ok != wantOK {
					t.Errorf("Deployment %s%s: GOMEMLIMIT %q (set: %t); want %q (set: %t)", fullname, suffix, got, ok, want, wantOK)
				}
				if !ok {
					continue
				}
				n, _ := goMemLimitBytes(got)
				if fromGo := goReadsMemLimit(t, got); fromGo != n {
					t.Errorf("GOMEMLIMIT=%s: Go's runtime takes %d bytes; these tests read %d", got, fromGo, n)
				}
			}
		})
	}
}

// goReadsMemLimit returns the memory limit Go's runtime takes from a
// GOMEMLIMIT value: this test binary, run again with it, prints it.
func goReadsMemLimit(t *testing.T, v string) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), printMemoryLimit+"=1", "GOMEMLIMIT="+v)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("GOMEMLIMIT=%s: Go refuses it: %v\n%s", v, err, out)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatalf("GOMEMLIMIT=%s: %v in %q", v, err, out)
	}
	return n
}
