package deploy

import (
	"cmp"
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// The chart, and the release every test renders it as.
const (
	chartDir  = "helm/omnistage"
	release   = "demo"
	namespace = "speech"
	fullname  = "demo-omnistage" // the release name, then the chart's
)

// manifests are the objects of one render, strictly decoded into the
// Kubernetes API types, by name.
type manifests struct {
	deployments map[string]*appsv1.Deployment
	services    map[string]*corev1.Service
	pdbs        map[string]*policyv1.PodDisruptionBudget
	hpas        map[string]*autoscalingv2.HorizontalPodAutoscaler
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	netpols     map[string]*networkingv1.NetworkPolicy
	notes       string
}

// loadChart loads the chart from its directory.
func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return ch
}

// target is what a render is told of its release and cluster; its zero
// value is `helm template` with no flags but the release name and
// namespace of every test.
type target struct {
	release, namespace string // "": release and namespace
	// kubeVersion is the cluster's version, or --kube-version without
	// one; "": Helm's default, as helm template without the flag reports it.
	kubeVersion string
	// cluster answers lookup, as on an install or upgrade; nil: no
	// cluster, as helm template.
	cluster engine.ClientProvider
}

// render renders the chart with values over its defaults as helm template
// (or, with a cluster, helm install) does: the chart's kubeVersion checked
// against the capabilities, the values against the schema, then the
// templates. It returns the first error.
func render(t *testing.T, values map[string]any, to target) (*manifests, error) {
	t.Helper()
	ch := loadChart(t)
	opts := chartutil.ReleaseOptions{Name: cmp.Or(to.release, release), Namespace: cmp.Or(to.namespace, namespace), Revision: 1, IsInstall: true}
	caps := chartutil.DefaultCapabilities.Copy()
	if to.kubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(to.kubeVersion)
		if err != nil {
			t.Fatal(err)
		}
		caps.KubeVersion = *kv
		if to.cluster != nil {
			caps.KubeVersion.Version = to.kubeVersion // a cluster's gitVersion, kept whole
		}
	}
	// What helm's action package checks before it renders, in its words.
	if kv := ch.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", kv, caps.KubeVersion.String())
	}
	vals, err := chartutil.ToRenderValues(ch, values, opts, caps)
	if err != nil {
		return nil, err
	}
	var out map[string]string
	if to.cluster != nil {
		out, err = engine.RenderWithClientProvider(ch, vals, to.cluster)
	} else {
		out, err = engine.Render(ch, vals)
	}
	if err != nil {
		return nil, err
	}
	m := &manifests{
		deployments: map[string]*appsv1.Deployment{},
		services:    map[string]*corev1.Service{},
		pdbs:        map[string]*policyv1.PodDisruptionBudget{},
		hpas:        map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		configMaps:  map[string]*corev1.ConfigMap{},
		secrets:     map[string]*corev1.Secret{},
		netpols:     map[string]*networkingv1.NetworkPolicy{},
	}
	for _, file := range slices.Sorted(maps.Keys(out)) {
		if strings.HasSuffix(file, "NOTES.txt") {
			m.notes = out[file]
			continue
		}
		docs := releaseutil.SplitManifests(out[file])
		for _, key := range slices.Sorted(maps.Keys(docs)) {
			if strings.TrimSpace(docs[key]) == "" {
				continue
			}
			m.add(t, path.Base(file), []byte(docs[key]))
		}
	}
	return m, nil
}

// mustRender renders the chart as helm template does and fails the test
// on an error.
func mustRender(t *testing.T, values map[string]any) *manifests {
	t.Helper()
	m, err := render(t, values, target{})
	if err != nil {
		t.Fatalf("rendering the chart: %v", err)
	}
	return m
}

// decodeStrict decodes a manifest into obj, failing the test on a field the
// API type lacks: a misspelt or misplaced key would otherwise vanish
// silently, as the API server would drop it.
func decodeStrict(t *testing.T, file string, doc []byte, obj any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatalf("%s: %v in\n%s", file, err, doc)
	}
}

// add decodes one manifest into its API type and files it by name.
func (m *manifests) add(t *testing.T, file string, doc []byte) {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		t.Fatalf("%s: %v in\n%s", file, err, doc)
	}
	switch gvk := tm.APIVersion + "/" + tm.Kind; gvk {
	case "apps/v1/Deployment":
		decodeInto(t, file, doc, m.deployments)
	case "v1/Service":
		decodeInto(t, file, doc, m.services)
	case "policy/v1/PodDisruptionBudget":
		decodeInto(t, file, doc, m.pdbs)
	case "autoscaling/v2/HorizontalPodAutoscaler":
		decodeInto(t, file, doc, m.hpas)
	case "v1/ConfigMap":
		decodeInto(t, file, doc, m.configMaps)
	case "v1/Secret":
		decodeInto(t, file, doc, m.secrets)
	case "networking.k8s.io/v1/NetworkPolicy":
		decodeInto(t, file, doc, m.netpols)
	default:
		t.Fatalf("%s: unexpected object %s (apiVersion %q, kind %q)", file, gvk, tm.APIVersion, tm.Kind)
	}
}

// decodeInto strictly decodes a manifest into a new T, checks its metadata
// and files it in objs by name.
func decodeInto[T any, P interface {
	*T
	metav1.Object
}](t *testing.T, file string, doc []byte, objs map[string]P) {
	t.Helper()
	obj := P(new(T))
	decodeStrict(t, file, doc, obj)
	kind := reflect.TypeFor[T]().Name()
	if _, dup := objs[obj.GetName()]; dup {
		t.Errorf("%s: two %s objects named %s", file, kind, obj.GetName())
	}
	objs[obj.GetName()] = obj
	checkMeta(t, kind, obj)
}

// checkMeta checks what every object carries: a valid name and the
// standard labels.
func checkMeta(t *testing.T, kind string, obj metav1.Object) {
	t.Helper()
	name, lbls := obj.GetName(), obj.GetLabels()
	valid := validation.IsDNS1123Subdomain
	if kind == "Service" {
		valid = validation.IsDNS1035Label
	}
	if errs := valid(name); len(errs) > 0 {
		t.Errorf("%s %q: invalid name: %s", kind, name, strings.Join(errs, "; "))
	}
	for _, l := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"} {
		if lbls[l] == "" {
			t.Errorf("%s %s: no label %s", kind, name, l)
		}
	}
	for k, v := range lbls {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("%s %s: label key %s: %s", kind, name, k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("%s %s: label %s=%q: %s", kind, name, k, v, strings.Join(errs, "; "))
		}
	}
}

// set builds a values map from dotted paths, as helm's --set does.
func set(kv ...any) map[string]any {
	vals := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		keys := strings.Split(kv[i].(string), ".")
		m := vals
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = kv[i+1]
	}
	return vals
}
