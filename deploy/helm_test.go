package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
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

// render renders the chart with values over its defaults, as helm install
// would into namespace, asking cluster (nil: none) for what lookup finds.
// It returns the render's error, the schema's included.
func render(t *testing.T, values map[string]any, cluster engine.ClientProvider) (*manifests, error) {
	t.Helper()
	ch := loadChart(t)
	vals, err := chartutil.ToRenderValues(ch, values,
		chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	var out map[string]string
	if cluster != nil {
		out, err = engine.RenderWithClientProvider(ch, vals, cluster)
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

// mustRender renders the chart and fails the test on an error.
func mustRender(t *testing.T, values map[string]any) *manifests {
	t.Helper()
	m, err := render(t, values, nil)
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

// server is one omnistage server the chart runs: a Deployment, the stage it
// serves (-1 for the front end) and what its container says.
type server struct {
	d         *appsv1.Deployment
	c         corev1.Container
	stage     int
	args      []string
	podLabels labels.Set
}

// servers returns the chart's servers: the stage servers by stage id, and
// the front end.
func (m *manifests) servers(t *testing.T) (stages map[int]server, front server) {
	t.Helper()
	stages = map[int]server{}
	fronts := 0
	for _, name := range slices.Sorted(maps.Keys(m.deployments)) {
		d := m.deployments[name]
		if n := len(d.Spec.Template.Spec.Containers); n != 1 {
			t.Fatalf("Deployment %s has %d containers; want 1", name, n)
		}
		s := server{d: d, c: d.Spec.Template.Spec.Containers[0], stage: -1, podLabels: d.Spec.Template.Labels}
		s.args = s.c.Args
		if len(s.args) == 0 || s.args[0] != "serve" {
			t.Fatalf("Deployment %s runs %v; want omnistage serve ...", name, s.args)
		}
		if v, ok := argValue(s.args, "--stage"); ok {
			if _, err := fmt.Sscan(v, &s.stage); err != nil {
				t.Fatalf("Deployment %s: --stage %q", name, v)
			}
			if other, dup := stages[s.stage]; dup {
				t.Errorf("Deployments %s and %s both serve stage %d", other.d.Name, name, s.stage)
			}
			stages[s.stage] = s
			continue
		}
		front = s
		fronts++
	}
	if fronts != 1 {
		t.Fatalf("the chart renders %d Deployments without --stage; want one front end", fronts)
	}
	return stages, front
}

// mountedFile resolves a file path in a server's container to the volume
// that holds it: the volume and the path inside it.
func (s server) mountedFile(t *testing.T, file string) (corev1.Volume, string) {
	t.Helper()
	for _, vm := range s.c.VolumeMounts {
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(vm.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range s.d.Spec.Template.Spec.Volumes {
			if v.Name == vm.Name {
				return v, rel
			}
		}
		t.Fatalf("Deployment %s mounts volume %s, which it does not declare", s.d.Name, vm.Name)
	}
	t.Fatalf("Deployment %s: no volume is mounted where %s is", s.d.Name, file)
	return corev1.Volume{}, ""
}

// secretRef names a key of a Secret.
type secretRef struct{ secret, key string }

// keyFile resolves the file a server's flag names to the Secret key that
// the kubelet writes there.
func (s server) keyFile(t *testing.T, flag string) secretRef {
	t.Helper()
	file, ok := argValue(s.args, flag)
	if !ok {
		t.Fatalf("Deployment %s: no %s in %v", s.d.Name, flag, s.args)
	}
	return s.secretOf(t, file)
}

// secretOf returns the Secret key mounted as file.
func (s server) secretOf(t *testing.T, file string) secretRef {
	t.Helper()
	v, rel := s.mountedFile(t, file)
	var sources []*corev1.SecretProjection
	switch {
	case v.Secret != nil:
		sources = append(sources, &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: v.Secret.SecretName}, Items: v.Secret.Items})
	case v.Projected != nil:
		for _, p := range v.Projected.Sources {
			if p.Secret != nil {
				sources = append(sources, p.Secret)
			}
		}
	default:
		t.Fatalf("Deployment %s: %s is on volume %s, which is no Secret", s.d.Name, file, v.Name)
	}
	for _, src := range sources {
		for _, item := range src.Items {
			if item.Path == rel {
				return secretRef{src.Name, item.Key}
			}
		}
	}
	t.Fatalf("Deployment %s: %s (%s on volume %s) is no item of the volume's Secrets", s.d.Name, file, rel, v.Name)
	return secretRef{}
}

// configFile returns the text of the file a server's --config names, from
// the ConfigMap mounted there, and the ConfigMap key.
func (s server) configFile(t *testing.T, m *manifests) (text, key string) {
	t.Helper()
	file, ok := argValue(s.args, "--config")
	if !ok {
		t.Fatalf("Deployment %s: no --config in %v", s.d.Name, s.args)
	}
	v, rel := s.mountedFile(t, file)
	if v.ConfigMap == nil {
		t.Fatalf("Deployment %s: --config %s is on volume %s, which is no ConfigMap", s.d.Name, file, v.Name)
	}
	cm, ok := m.configMaps[v.ConfigMap.Name]
	if !ok {
		t.Fatalf("Deployment %s mounts ConfigMap %s, which the chart does not render", s.d.Name, v.ConfigMap.Name)
	}
	text, ok = cm.Data[rel]
	if !ok {
		t.Fatalf("Deployment %s: --config %s: ConfigMap %s has no key %s", s.d.Name, file, cm.Name, rel)
	}
	return text, cm.Name + "/" + rel
}

// selects reports whether a label selector map selects pods labelled l.
func selects(selector map[string]string, l labels.Set) bool {
	return len(selector) > 0 && labels.SelectorFromSet(selector).Matches(l)
}

// want is what a render must deploy.
type want struct {
	route          routeJSON // the stage servers' pipeline, as omnistage route resolves it
	existingSecret string    // the Secret the keys come from when the chart makes none
}

// checkChart checks every invariant of a render: a Deployment, a headless
// Service and a PodDisruptionBudget per stage the route runs, each running
// omnistage serve --stage N with a config omnistage accepts; a front end
// whose config places each of those stages remote at its Service; the same
// key files, probes and security settings on every server; a NetworkPolicy
// letting only the front end reach stage servers.
func checkChart(t *testing.T, m *manifests, w want) {
	t.Helper()
	stages, front := m.servers(t)
	all := append([]server{front}, slices.Collect(maps.Values(stages))...)

	// One stage server Deployment per stage the route runs, and none else.
	wantIDs := w.route.onRoute()
	if got := slices.Sorted(maps.Keys(stages)); !slices.Equal(got, slices.Sorted(slices.Values(wantIDs))) {
		t.Errorf("stage servers for stages %v; want %v (the route and the aligner)", got, wantIDs)
	}

	// The stage servers' config: valid, the expected pipeline, one file.
	var stageConfig string
	for _, id := range wantIDs {
		s, ok := stages[id]
		if !ok {
			continue
		}
		text, key := s.configFile(t, m)
		if stageConfig == "" {
			stageConfig = text
			got := routeText(t, "stage.yaml", text)
			if !reflect.DeepEqual(got, w.route) {
				t.Errorf("the stage servers' config %s resolves to %+v; want %+v", key, got, w.route)
			}
		} else if text != stageConfig {
			t.Errorf("stage servers run different configs (%s differs)", key)
		}
		checkChecksum(t, s, text)
	}

	// Each stage server: a headless Service and a PodDisruptionBudget
	// selecting its pods and no other server's.
	hosts := map[int]string{}
	for _, id := range wantIDs {
		s, ok := stages[id]
		if !ok {
			continue
		}
		var svcs []*corev1.Service
		for _, svc := range m.services {
			if selects(svc.Spec.Selector, s.podLabels) {
				svcs = append(svcs, svc)
			}
		}
		if len(svcs) != 1 {
			t.Errorf("stage %d (Deployment %s): %d Services select its pods; want one headless Service", id, s.d.Name, len(svcs))
			continue
		}
		svc := svcs[0]
		hosts[id] = fmt.Sprintf("%s.%s.svc.cluster.local", svc.Name, namespace)
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("Service %s: clusterIP %q; want None (headless: its name resolves to every ready pod)", svc.Name, svc.Spec.ClusterIP)
		}
		checkServicePorts(t, svc, s)
		for _, other := range all {
			if other.d != s.d && selects(svc.Spec.Selector, other.podLabels) {
				t.Errorf("Service %s also selects the pods of %s", svc.Name, other.d.Name)
			}
		}
		var pdbs []string
		for _, pdb := range m.pdbs {
			if pdb.Spec.Selector != nil && selects(pdb.Spec.Selector.MatchLabels, s.podLabels) {
				pdbs = append(pdbs, pdb.Name)
				if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
					t.Errorf("PodDisruptionBudget %s sets neither maxUnavailable nor minAvailable", pdb.Name)
				}
			}
		}
		if len(pdbs) != 1 {
			t.Errorf("stage %d (Deployment %s): PodDisruptionBudgets %v select its pods; want one", id, s.d.Name, pdbs)
		}
		if sel := s.d.Spec.Selector; sel == nil || !selects(sel.MatchLabels, s.podLabels) {
			t.Errorf("Deployment %s: its selector does not select its own pods", s.d.Name)
		}
	}

	// The front end: its config is valid, runs the stage servers' pipeline
	// and places every stage the route runs at that stage's Service.
	frontText, key := front.configFile(t, m)
	routeText(t, "frontend.yaml", frontText)
	checkChecksum(t, front, frontText)
	fc, sc := parseConfig(t, key, frontText), parseConfig(t, "stage config", stageConfig)
	if !reflect.DeepEqual(fc.Pipeline, sc.Pipeline) {
		t.Errorf("the front end's pipeline section differs from the stage servers': they would refuse each other's payloads\nfront end: %v\nstages: %v", fc.Pipeline, sc.Pipeline)
	}
	frontAPIKey, _ := argValue(front.args, "--api-key-file")
	for _, id := range wantIDs {
		e, ok := fc.entry(id)
		wantURL := fmt.Sprintf("http://%s:8080", hosts[id])
		switch {
		case !ok:
			t.Errorf("%s: no deploy entry for stage %d", key, id)
		case e.Placement != "remote" || !slices.Equal(e.Endpoints, []string{wantURL}):
			t.Errorf("%s: stage %d is %q at %v; want remote at [%s], its headless Service", key, id, e.Placement, e.Endpoints, wantURL)
		case e.APIKeyFile != frontAPIKey:
			t.Errorf("%s: stage %d api_key_file %q; want %s, the front end's --api-key-file (the key every server shares)", key, id, e.APIKeyFile, frontAPIKey)
		}
	}
	for _, e := range fc.Deploy.Stages {
		if e.Placement == "remote" && !slices.Contains(wantIDs, e.ID) {
			t.Errorf("%s: stage %d, which the route skips, is placed remote, on no stage server", key, e.ID)
		}
	}
	var frontSvcs []string
	for _, svc := range m.services {
		if selects(svc.Spec.Selector, front.podLabels) {
			frontSvcs = append(frontSvcs, svc.Name)
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				t.Errorf("the front end's Service %s is headless; clients need one address", svc.Name)
			}
			checkServicePorts(t, svc, front)
		}
	}
	if len(frontSvcs) != 1 {
		t.Errorf("Services %v select the front end's pods; want one", frontSvcs)
	}

	// Every server: the same two keys, from Secrets, as files.
	var payload, api secretRef
	for i, s := range all {
		p, a := s.keyFile(t, "--payload-key-file"), s.keyFile(t, "--api-key-file")
		if i == 0 {
			payload, api = p, a
		} else if p != payload || a != api {
			t.Errorf("Deployment %s reads keys %v and %v; %s reads %v and %v: every server needs the same keys", s.d.Name, p, a, all[0].d.Name, payload, api)
		}
		checkServer(t, s)
	}
	if payload == api {
		t.Errorf("the payload key and the API key are the same Secret key %v", payload)
	}
	for _, ref := range []secretRef{payload, api} {
		sec, ok := m.secrets[ref.secret]
		switch {
		case ok:
			if v := sec.Data[ref.key]; len(v) < 16 {
				t.Errorf("Secret %s: key %s is %d bytes; omnistage wants at least 16", sec.Name, ref.key, len(v))
			}
		case ref.secret != w.existingSecret || w.existingSecret == "":
			t.Errorf("the servers read %v, which the chart does not render (existing Secret: %q)", ref, w.existingSecret)
		}
	}

	checkNetworkPolicy(t, m, stages, front)
}

// checkServicePorts checks that a Service's ports reach the server's
// listening port.
func checkServicePorts(t *testing.T, svc *corev1.Service, s server) {
	t.Helper()
	if len(svc.Spec.Ports) == 0 {
		t.Errorf("Service %s has no ports", svc.Name)
	}
	for _, p := range svc.Spec.Ports {
		if target := containerPort(s.c, p.TargetPort.String()); target != 8080 {
			t.Errorf("Service %s: port %d targets %s, not the server's port 8080", svc.Name, p.Port, p.TargetPort.String())
		}
	}
}

// containerPort resolves a port name or number of c.
func containerPort(c corev1.Container, port string) int32 {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return p.ContainerPort
		}
	}
	return 0
}

// checkChecksum checks that a server's pods carry the checksum of the
// config file they read, so that a change to it rolls them.
func checkChecksum(t *testing.T, s server, config string) {
	t.Helper()
	sum := sha256.Sum256([]byte(config))
	if got, want := s.d.Spec.Template.Annotations["checksum/config"], hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Deployment %s: pod annotation checksum/config %q; want %s, the sha256 of the config it reads", s.d.Name, got, want)
	}
}

// checkServer checks what every server's pod needs: to listen on every
// address, probes on /ready and /health, a non-root, read-only,
// unprivileged container with a writable /tmp.
func checkServer(t *testing.T, s server) {
	t.Helper()
	name := s.d.Name
	if addr, _ := argValue(s.args, "--addr"); addr != "0.0.0.0:8080" || containerPort(s.c, "8080") != 8080 {
		t.Errorf("Deployment %s: --addr %q and ports %+v; want 0.0.0.0:8080 and containerPort 8080", name, addr, s.c.Ports)
	}
	for _, p := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{{"readiness", s.c.ReadinessProbe, "/ready"}, {"liveness", s.c.LivenessProbe, "/health"}} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			t.Errorf("Deployment %s: no HTTP %s probe", name, p.kind)
		case p.probe.HTTPGet.Path != p.path || containerPort(s.c, p.probe.HTTPGet.Port.String()) != 8080:
			t.Errorf("Deployment %s: %s probe GET %s on port %s; want %s on 8080", name, p.kind, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}

	pod := s.d.Spec.Template.Spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	c := s.c.SecurityContext
	if c == nil {
		c = &corev1.SecurityContext{}
	}
	first := func(a, b *bool) bool { // the container's setting wins
		if a != nil {
			return *a
		}
		return b != nil && *b
	}
	if !first(c.RunAsNonRoot, pod.RunAsNonRoot) {
		t.Errorf("Deployment %s: runAsNonRoot is not true", name)
	}
	uid := pod.RunAsUser
	if c.RunAsUser != nil {
		uid = c.RunAsUser
	}
	if uid == nil || *uid == 0 {
		t.Errorf("Deployment %s: runAsUser %v; want a non-root uid", name, uid)
	}
	if c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem {
		t.Errorf("Deployment %s: readOnlyRootFilesystem is not true", name)
	}
	if c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		t.Errorf("Deployment %s: allowPrivilegeEscalation is not false", name)
	}
	if c.Capabilities == nil || !slices.Contains(c.Capabilities.Drop, "ALL") || len(c.Capabilities.Add) > 0 {
		t.Errorf("Deployment %s: capabilities %+v; want drop [ALL] and nothing added", name, c.Capabilities)
	}
	seccomp := pod.SeccompProfile
	if c.SeccompProfile != nil {
		seccomp = c.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("Deployment %s: seccompProfile %+v; want RuntimeDefault", name, seccomp)
	}
	if v, _ := s.mountedFile(t, "/tmp/x"); v.EmptyDir == nil {
		t.Errorf("Deployment %s: /tmp is on volume %s, not an emptyDir (the root file system is read-only)", name, v.Name)
	}
	if b := s.d.Spec.Template.Spec.AutomountServiceAccountToken; b == nil || *b {
		t.Errorf("Deployment %s: mounts a service account token it never uses", name)
	}
}

// checkNetworkPolicy checks that a NetworkPolicy covers every stage
// server's pods and admits only the front end's.
func checkNetworkPolicy(t *testing.T, m *manifests, stages map[int]server, front server) {
	t.Helper()
	for _, id := range slices.Sorted(maps.Keys(stages)) {
		s := stages[id]
		var covering []*networkingv1.NetworkPolicy
		for _, np := range m.netpols {
			if sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err == nil && len(np.Spec.PodSelector.MatchLabels)+len(np.Spec.PodSelector.MatchExpressions) > 0 && sel.Matches(s.podLabels) && slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				covering = append(covering, np)
			}
		}
		if len(covering) == 0 {
			t.Errorf("no NetworkPolicy restricts ingress to stage %d's pods (Deployment %s)", id, s.d.Name)
		}
		for _, np := range covering {
			if len(np.Spec.Ingress) == 0 {
				t.Errorf("NetworkPolicy %s admits nobody, not even the front end", np.Name)
			}
			for _, rule := range np.Spec.Ingress {
				if len(rule.From) == 0 {
					t.Errorf("NetworkPolicy %s has an ingress rule from anywhere", np.Name)
				}
				for _, peer := range rule.From {
					sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
					switch {
					case peer.IPBlock != nil || peer.NamespaceSelector != nil || peer.PodSelector == nil || err != nil:
						t.Errorf("NetworkPolicy %s admits %+v; want only the front end's pods", np.Name, peer)
					case !sel.Matches(front.podLabels):
						t.Errorf("NetworkPolicy %s admits pods %v, which are not the front end's", np.Name, peer.PodSelector)
					}
					for _, other := range stages {
						if err == nil && peer.PodSelector != nil && sel.Matches(other.podLabels) {
							t.Errorf("NetworkPolicy %s admits stage pods of %s", np.Name, other.d.Name)
						}
					}
				}
			}
		}
	}
	for _, np := range m.netpols {
		if sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err == nil && sel.Matches(front.podLabels) {
			t.Errorf("NetworkPolicy %s also restricts the front end", np.Name)
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

func TestChartRenders(t *testing.T) {
	tts := route(t, "builtin:tts")
	tests := []struct {
		name   string
		values map[string]any
		want   want
		check  func(t *testing.T, m *manifests)
	}{
		{
			name: "defaults",
			want: want{route: tts},
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
				if !strings.Contains(m.notes, "port-forward svc/"+fullname) {
					t.Errorf("NOTES.txt does not say how to reach the front end:\n%s", m.notes)
				}
			},
		},
		{
			name:   "tracing",
			values: map[string]any{"tracing": map[string]any{"otlpEndpoint": "http://collector:4318", "sampler": "parentbased_traceidratio", "samplerArg": "0.25"}},
			want:   want{route: tts},
			check: func(t *testing.T, m *manifests) {
				if len(m.deployments) != 4 {
					t.Errorf("%d Deployments; want 4", len(m.deployments))
				}
				for _, d := range m.deployments {
					env := map[string]string{}
					for _, e := range d.Spec.Template.Spec.Containers[0].Env {
						env[e.Name] = e.Value
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
			name: "existing secret",
			values: set("keys.payload.existingSecret", "omni-keys",
				"keys.api.existingSecret", "omni-keys", "keys.api.secretKey", "token"),
			want: want{route: tts, existingSecret: "omni-keys"},
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
			want:   want{route: tts},
			check: func(t *testing.T, m *manifests) {
				stages, front := m.servers(t)
				all := []server{front}
				for _, s := range stages {
					all = append(all, s)
				}
				for _, s := range all {
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
			want:   want{route: tts, existingSecret: "omni-api"},
			check: func(t *testing.T, m *manifests) {
				sec := m.secrets[fullname+"-keys"]
				if sec == nil || len(sec.Data) != 1 || string(sec.Data["payload-key"]) != "0123456789abcdef-payload" {
					t.Errorf("the chart's Secret %v; want only the given payload key", sec)
				}
			},
		},
		{
			name: "autoscaling",
			values: set("stages.vocoder.autoscaling.enabled", true, "stages.vocoder.autoscaling.maxReplicas", 6,
				"stages.vocoder.autoscaling.targetMemoryUtilizationPercentage", 70),
			want: want{route: tts},
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
			want:   want{route: tts},
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
			want: want{route: tts},
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
		{
			name:   "a skip route",
			values: set("config", readFile(t, "internal/pipeline/builtin/tts-raw.yaml")),
			want:   want{route: route(t, "builtin:tts-raw")},
			check: func(t *testing.T, m *manifests) {
				if _, ok := m.deployments[fullname+"-enhance"]; ok {
					t.Error("a stage server for enhance, which the route skips")
				}
			},
		},
		{
			name:   "four stages",
			values: set("config", readFile(t, "internal/pipeline/builtin/tts-24k.yaml"), "stages.enhance.replicas", 2),
			want:   want{route: route(t, "builtin:tts-24k")},
			check: func(t *testing.T, m *manifests) {
				if d := m.deployments[fullname+"-enhance"]; d == nil || *d.Spec.Replicas != 2 {
					t.Errorf("enhance Deployment %v; want 2 replicas", d)
				}
			},
		},
		{
			name:   "stage names that are no DNS labels",
			values: set("config", customConfig),
			want:   want{route: routeText(t, "custom.yaml", customConfig)},
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
		{
			name:   "fullnameOverride",
			values: set("fullnameOverride", "speech"),
			want:   want{route: tts},
			check: func(t *testing.T, m *manifests) {
				if m.deployments["speech"] == nil || m.services["speech-vocoder"] == nil {
					t.Errorf("Deployments %v, Services %v; want speech and speech-vocoder", slices.Sorted(maps.Keys(m.deployments)), slices.Sorted(maps.Keys(m.services)))
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustRender(t, tt.values)
			checkChart(t, m, tt.want)
			if tt.check != nil {
				tt.check(t, m)
			}
		})
	}
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(t, tt.values, nil)
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

// fakeCluster is a ClientProvider over a fake dynamic client holding objs,
// for the chart's lookup calls.
type fakeCluster struct{ client dynamic.Interface }

func (c fakeCluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	if apiVersion != "v1" || kind != "Secret" {
		return nil, false, fmt.Errorf("fake cluster: no %s %s", apiVersion, kind)
	}
	return c.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}), true, nil
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
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "SecretList"}, existing)
	m, err := render(t, nil, fakeCluster{client})
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

// TestChartDefaultsDeployBuiltinTTS checks that the chart's default config
// is the built-in tts pipeline's file, so that they cannot drift apart.
func TestChartDefaultsDeployBuiltinTTS(t *testing.T) {
	got := loadChart(t).Values["config"]
	if want := readFile(t, "internal/pipeline/builtin/tts.yaml"); got != want {
		t.Errorf("values.yaml config is not internal/pipeline/builtin/tts.yaml:\n--- values.yaml\n%s\n--- tts.yaml\n%s", got, want)
	}
}

// TestChartLint runs helm lint's checks on the chart with its defaults and
// a variant, and fails on any warning or error.
func TestChartLint(t *testing.T) {
	for _, values := range []map[string]any{nil, set("stageDefaults.autoscaling.enabled", true, "networkPolicy.enabled", false)} {
		res := lint.All(chartDir, values, namespace, false)
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
