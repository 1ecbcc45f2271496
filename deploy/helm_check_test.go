package deploy

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// want is what a render must deploy.
type want struct {
	// pipelines are the pipelines served, in the order of the front end's
	// --config flags, as omnistage route resolves the stage servers' configs.
	pipelines []routeJSON
	// defaultModel is the front end's --default-model; "": none given.
	defaultModel   string
	existingSecret string // the Secret the keys come from when the chart makes none
}

// one is what a render of the one pipeline r must deploy.
func one(r routeJSON) want { return want{pipelines: []routeJSON{r}} }

// stageKeys returns every stage a stage server is needed for: each
// pipeline's route and aligner.
func (w want) stageKeys() []stageKey {
	var keys []stageKey
	for _, p := range w.pipelines {
		for _, id := range p.onRoute() {
			keys = append(keys, stageKey{p.Name, id})
		}
	}
	return keys
}

// checkChart checks every invariant of a render: per stage each pipeline's
// route runs, a Deployment, a headless Service and a PodDisruptionBudget,
// running omnistage serve --stage N --pipeline P with a config omnistage
// accepts; a front end serving every pipeline, whose config for each places
// each of those stages remote at its Service; the same key files, probes
// and security settings on every server; a NetworkPolicy letting only the
// front end reach stage servers.
func checkChart(t *testing.T, m *manifests, w want) {
	t.Helper()
	stages, front := m.servers(t)
	all := append([]server{front}, slices.Collect(maps.Values(stages))...)
	hosts, stageConfigs := checkStageServers(t, m, w, stages, all)
	checkFrontend(t, m, w, front, hosts, stageConfigs)
	checkKeys(t, m, w, all)
	for _, s := range all {
		checkServer(t, s)
	}
	checkNetworkPolicy(t, m, stages, front)
}

// checkStageServers checks that there is a stage server for each stage
// each route runs and no other, that all of a pipeline's run one config,
// its own, and that each has a Service and a PodDisruptionBudget of its
// own. It returns each stage's Service host name and each pipeline's
// stage-server config.
func checkStageServers(t *testing.T, m *manifests, w want, stages map[stageKey]server, all []server) (hosts map[stageKey]string, configs map[string]string) {
	t.Helper()
	wantKeys := w.stageKeys()
	byKey := func(a, b stageKey) int { return strings.Compare(a.String(), b.String()) }
	if got := slices.SortedFunc(maps.Keys(stages), byKey); !slices.Equal(got, slices.SortedFunc(slices.Values(wantKeys), byKey)) {
		t.Errorf("stage servers for %v; want %v (each route and aligner)", got, wantKeys)
	}
	routes := map[string]routeJSON{}
	for _, p := range w.pipelines {
		routes[p.Name] = p
	}
	hosts, configs = map[stageKey]string{}, map[string]string{}
	for _, k := range wantKeys {
		s, ok := stages[k]
		if !ok {
			continue
		}
		text, key := s.configFile(t, m)
		if first, seen := configs[k.pipeline]; !seen {
			configs[k.pipeline] = text
			if got := routeText(t, "stage.yaml", text); !reflect.DeepEqual(got, routes[k.pipeline]) {
				t.Errorf("%s's stage servers' config %s resolves to %+v; want %+v", k.pipeline, key, got, routes[k.pipeline])
			}
		} else if text != first {
			t.Errorf("%s's stage servers run different configs (%s differs)", k.pipeline, key)
		}
		checkChecksum(t, s, text)
		if host, ok := checkStageObjects(t, m, k, s, all); ok {
			hosts[k] = host
		}
	}
	return hosts, configs
}

// checkStageObjects checks that one stage server has a headless Service
// and a PodDisruptionBudget selecting its pods and no other server's, and
// returns the Service's host name.
func checkStageObjects(t *testing.T, m *manifests, k stageKey, s server, all []server) (string, bool) {
	t.Helper()
	if sel := s.d.Spec.Selector; sel == nil || !selects(sel.MatchLabels, s.podLabels) {
		t.Errorf("Deployment %s: its selector does not select its own pods", s.d.Name)
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
		t.Errorf("%s (Deployment %s): PodDisruptionBudgets %v select its pods; want one", k, s.d.Name, pdbs)
	}
	var svcs []*corev1.Service
	for _, svc := range m.services {
		if selects(svc.Spec.Selector, s.podLabels) {
			svcs = append(svcs, svc)
		}
	}
	if len(svcs) != 1 {
		t.Errorf("%s (Deployment %s): %d Services select its pods; want one headless Service", k, s.d.Name, len(svcs))
		return "", false
	}
	svc := svcs[0]
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service %s: clusterIP %q; want None (headless: its name resolves to every ready pod)", svc.Name, svc.Spec.ClusterIP)
	}
	checkServicePorts(t, svc, s)
	for _, other := range all {
		if other.d != s.d && selects(svc.Spec.Selector, other.podLabels) {
			t.Errorf("Service %s also selects the pods of %s", svc.Name, other.d.Name)
		}
	}
	host := fmt.Sprintf("%s.%s.svc.cluster.local", svc.Name, namespace)
	checkAnswersTo(t, s, host)
	return host, true
}

// checkAnswersTo checks that server s answers to host (serve
// --allowed-hosts: a name, or a domain's names), which calls it: a server
// refuses a Host it does not answer to (403 forbidden_host).
func checkAnswersTo(t *testing.T, s server, host string) {
	t.Helper()
	allowed, _ := argValue(s.args, "--allowed-hosts")
	for _, a := range strings.Split(allowed, ",") {
		if a == host || a == "*" || (strings.HasPrefix(a, ".") && strings.HasSuffix(host, a)) || (strings.HasPrefix(a, "*.") && strings.HasSuffix(host, a[1:])) {
			return
		}
	}
	t.Errorf("Deployment %s: --allowed-hosts %q does not hold %s, the name it is called by", s.d.Name, allowed, host)
}

// checkFrontend checks that the front end serves every pipeline, in
// order, each from a config omnistage accepts (all of them together too)
// that runs the pipeline of its stage servers and places every stage its
// route runs at that stage's Service; that it takes the default model
// wanted; and that one Service, not headless, reaches it.
func checkFrontend(t *testing.T, m *manifests, w want, front server, hosts map[stageKey]string, stageConfigs map[string]string) {
	t.Helper()
	files := argValues(front.args, "--config")
	if len(files) != len(w.pipelines) {
		t.Fatalf("the front end runs --config %v; want one per pipeline (%d)", files, len(w.pipelines))
	}
	dir := t.TempDir()
	var texts, paths []string
	for i, file := range files {
		text, key := front.mountedConfig(t, m, file)
		texts = append(texts, text)
		paths = append(paths, writeFile(t, dir, fmt.Sprintf("frontend-%d.yaml", i), text))
		p := w.pipelines[i]
		fc := parseConfig(t, key, text)
		if sc := parseConfig(t, "stage config", stageConfigs[p.Name]); !reflect.DeepEqual(fc.Pipeline, sc.Pipeline) {
			t.Errorf("%s: its pipeline section differs from %s's stage servers': they would refuse each other's payloads\nfront end: %v\nstages: %v", key, p.Name, fc.Pipeline, sc.Pipeline)
		}
		checkFrontendEntries(t, key, fc, front, p, hosts)
	}
	var names, wantNames []string
	for i, r := range routes(t, paths...) {
		names = append(names, r.Name)
		wantNames = append(wantNames, w.pipelines[i].Name)
	}
	if !slices.Equal(names, wantNames) {
		t.Errorf("the front end's configs %v hold pipelines %v; want %v", files, names, wantNames)
	}
	checkChecksum(t, front, strings.Join(texts, "\n---\n"))
	if got, _ := argValue(front.args, "--default-model"); got != w.defaultModel {
		t.Errorf("the front end's --default-model %q; want %q", got, w.defaultModel)
	}
	var frontSvcs []string
	for _, svc := range m.services {
		if selects(svc.Spec.Selector, front.podLabels) {
			frontSvcs = append(frontSvcs, svc.Name)
			if svc.Spec.ClusterIP == corev1.ClusterIPNone {
				t.Errorf("the front end's Service %s is headless; clients need one address", svc.Name)
			}
			checkServicePorts(t, svc, front)
			for _, host := range []string{svc.Name, svc.Name + "." + namespace, svc.Name + "." + namespace + ".svc.cluster.local"} {
				checkAnswersTo(t, front, host)
			}
		}
	}
	if len(frontSvcs) != 1 {
		t.Errorf("Services %v select the front end's pods; want one", frontSvcs)
	}
}

// checkFrontendEntries checks the deploy entries of the front end's config
// for pipeline p: each stage its route runs remote at that stage's
// Service, with the front end's API key; no stage the route skips remote.
func checkFrontendEntries(t *testing.T, key string, fc serverConfig, front server, p routeJSON, hosts map[stageKey]string) {
	t.Helper()
	frontAPIKey, _ := argValue(front.args, "--api-key-file")
	for _, id := range p.onRoute() {
		e, ok := fc.entry(id)
		wantURL := fmt.Sprintf("http://%s:8080", hosts[stageKey{p.Name, id}])
		switch {
		case !ok:
			t.Errorf("%s: no deploy entry for stage %d", key, id)
		case e.Placement != "remote" || !slices.Equal(e.Endpoints, []string{wantURL}):
			t.Errorf("%s: stage %d is %q at %v; want remote at [%s], the headless Service of %s's stage %d", key, id, e.Placement, e.Endpoints, wantURL, p.Name, id)
		case e.APIKeyFile != frontAPIKey:
			t.Errorf("%s: stage %d api_key_file %q; want %s, the front end's --api-key-file (the key every server shares)", key, id, e.APIKeyFile, frontAPIKey)
		}
	}
	for _, e := range fc.Deploy.Stages {
		if e.Placement == "remote" && !slices.Contains(p.onRoute(), e.ID) {
			t.Errorf("%s: stage %d, which the route skips, is placed remote, on no stage server", key, e.ID)
		}
	}
}

// checkKeys checks that every server reads the same two keys, from
// Secrets, as files, and that the chart renders those Secrets unless they
// are existing ones.
func checkKeys(t *testing.T, m *manifests, w want, all []server) {
	t.Helper()
	var payload, api secretRef
	for i, s := range all {
		p, a := s.keyFile(t, "--payload-key-file"), s.keyFile(t, "--api-key-file")
		if i == 0 {
			payload, api = p, a
		} else if p != payload || a != api {
			t.Errorf("Deployment %s reads keys %v and %v; %s reads %v and %v: every server needs the same keys", s.d.Name, p, a, all[0].d.Name, payload, api)
		}
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
}
