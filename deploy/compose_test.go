package deploy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// Where compose.yaml's servers find their keys: compose mounts a service's
// secret at /run/secrets/<name>.
const (
	composePayloadKey = "/run/secrets/payload-key"
	composeAPIKey     = "/run/secrets/api-key"
)

// loadCompose loads ../compose.yaml with compose-go's loader, as docker
// compose does, with env as the environment.
func loadCompose(t *testing.T, env ...string) *types.Project {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(root, "compose.yaml")},
		cli.WithWorkingDirectory(root), cli.WithEnv(env), cli.WithResolvedPaths(true))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return p
}

// stageOf returns the stage a service serves (its --stage), or -1 for the
// front end.
func stageOf(t *testing.T, s types.ServiceConfig) int {
	t.Helper()
	v, ok := argValue(s.Command, "--stage")
	if !ok {
		return -1
	}
	id, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("service %s: --stage %q is not a stage id", s.Name, v)
	}
	return id
}

// composeKeys are the keys the compose tests run with, as the
// environment variables compose.yaml reads them from.
var composeKeys = map[string]string{"OMNISTAGE_PAYLOAD_KEY": "0123456789abcdef0123", "OMNISTAGE_API_KEY": "fedcba9876543210fedc"}

// loadComposeWithKeys loads ../compose.yaml with composeKeys.
func loadComposeWithKeys(t *testing.T) *types.Project {
	t.Helper()
	var env []string
	for k, v := range composeKeys {
		env = append(env, k+"="+v)
	}
	return loadCompose(t, env...)
}

// composeServers splits compose.yaml's services into the stage servers, by
// the stage they serve (--pipeline and --stage), and the front end.
func composeServers(t *testing.T, p *types.Project) (map[stageKey]types.ServiceConfig, types.ServiceConfig) {
	t.Helper()
	byStage := map[stageKey]types.ServiceConfig{}
	var front []types.ServiceConfig
	for _, s := range p.Services {
		id := stageOf(t, s)
		if id < 0 {
			front = append(front, s)
			continue
		}
		pipeline, _ := argValue(s.Command, "--pipeline")
		if pipeline == "" {
			t.Errorf("service %s: serve --stage %d without --pipeline", s.Name, id)
		}
		if config, _ := argValue(s.Command, "--config"); config != "builtin:"+pipeline {
			t.Errorf("service %s: --config %q; want builtin:%s, the pipeline it serves a stage of", s.Name, config, pipeline)
		}
		k := stageKey{pipeline, id}
		if other, dup := byStage[k]; dup {
			t.Errorf("services %s and %s both serve %s", other.Name, s.Name, k)
		}
		byStage[k] = s
	}
	if len(front) != 1 {
		t.Fatalf("compose.yaml has %d services without --stage; want one front end", len(front))
	}
	return byStage, front[0]
}

// TestCompose checks that compose.yaml runs two built-in pipelines, tts
// and tts-24k, as one front end and one stage server per stage of each,
// named <pipeline>-<stage>, the front end's config for each pipeline
// placing each stage on its service; that every server shares the keys,
// listens on every address, runs as a non-root user on a read-only file
// system and has a health check on /ready; and that only the front end
// publishes a port, on the loopback address.
func TestCompose(t *testing.T) {
	p := loadComposeWithKeys(t)
	byStage, fe := composeServers(t, p)
	pipelines := checkComposeFrontendConfigs(t, p, fe, byStage)
	var names []string
	stages := 0
	for _, want := range pipelines {
		names = append(names, want.Name)
		for _, st := range want.stages() {
			stages++
			s, ok := byStage[stageKey{want.Name, st.ID}]
			if !ok {
				t.Errorf("no service runs %s's stage %d (%s) with --pipeline %s --stage %d", want.Name, st.ID, st.Name, want.Name, st.ID)
				continue
			}
			if s.Name != want.Name+"-"+st.Name {
				t.Errorf("service %s serves %s's stage %d, %s: name the service %s-%s", s.Name, want.Name, st.ID, st.Name, want.Name, st.Name)
			}
			if dep, ok := fe.DependsOn[s.Name]; !ok || dep.Condition != types.ServiceConditionHealthy {
				t.Errorf("front end %s does not depend on %s with condition service_healthy (has %+v)", fe.Name, s.Name, fe.DependsOn)
			}
		}
	}
	if !slices.Equal(names, []string{"tts", "tts-24k"}) {
		t.Errorf("the front end serves %v; want tts and tts-24k, two pipelines", names)
	}
	if len(byStage) != stages {
		t.Errorf("compose.yaml has %d stage services; its pipelines have %d stages", len(byStage), stages)
	}
	if dm, _ := argValue(fe.Command, "--default-model"); !slices.Contains(names, dm) {
		t.Errorf("front end %s: --default-model %q; want one of the pipelines it serves, %v", fe.Name, dm, names)
	}

	for _, name := range []string{"payload-key", "api-key"} {
		if _, ok := p.Secrets[name]; !ok {
			t.Errorf("compose.yaml declares no secret %s", name)
		}
	}
	for _, s := range p.Services {
		checkComposeServer(t, s)
	}
	checkComposePorts(t, fe, p)
}

// checkComposePorts checks that the front end alone publishes a port, on
// 127.0.0.1 and OMNISTAGE_PORT (8080 by default).
func checkComposePorts(t *testing.T, fe types.ServiceConfig, p *types.Project) {
	t.Helper()
	for _, s := range p.Services {
		if s.Name != fe.Name && len(s.Ports) > 0 {
			t.Errorf("stage service %s publishes ports %+v; only the front end may", s.Name, s.Ports)
		}
	}
	if len(fe.Ports) != 1 {
		t.Fatalf("front end %s publishes %d ports; want one", fe.Name, len(fe.Ports))
	}
	if port := fe.Ports[0]; port.HostIP != "127.0.0.1" || port.Target != 8080 || port.Published != "8080" {
		t.Errorf("front end publishes %s:%s -> %d; want 127.0.0.1:8080 -> 8080 by default", port.HostIP, port.Published, port.Target)
	}
	if port := loadCompose(t, "OMNISTAGE_PORT=9000").Services[fe.Name].Ports[0]; port.Published != "9000" || port.HostIP != "127.0.0.1" {
		t.Errorf("with OMNISTAGE_PORT=9000 the front end publishes %s:%s; want 127.0.0.1:9000", port.HostIP, port.Published)
	}
}

// checkComposeServer checks what every server of compose.yaml shares.
func checkComposeServer(t *testing.T, s types.ServiceConfig) {
	t.Helper()
	secrets := map[string]string{}
	for _, sec := range s.Secrets {
		target := sec.Target
		if target == "" {
			target = "/run/secrets/" + sec.Source
		} else if !strings.HasPrefix(target, "/") {
			target = "/run/secrets/" + target
		}
		secrets[target] = sec.Source
	}
	for _, f := range []struct{ flag, file, secret string }{
		{"--payload-key-file", composePayloadKey, "payload-key"},
		{"--api-key-file", composeAPIKey, "api-key"},
	} {
		if v, _ := argValue(s.Command, f.flag); v != f.file {
			t.Errorf("service %s: %s %q; want %s", s.Name, f.flag, v, f.file)
		}
		if secrets[f.file] != f.secret {
			t.Errorf("service %s: secret %s is not mounted at %s (mounts %v)", s.Name, f.secret, f.file, secrets)
		}
	}
	if v, _ := argValue(s.Command, "--addr"); v != "0.0.0.0:8080" {
		t.Errorf("service %s: --addr %q; want 0.0.0.0:8080", s.Name, v)
	}
	if len(s.Command) == 0 || s.Command[0] != "serve" {
		t.Errorf("service %s: command %v; want serve ...", s.Name, s.Command)
	}
	uid, _, _ := strings.Cut(s.User, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("service %s: user %q; want a numeric non-root user", s.Name, s.User)
	}
	if !s.ReadOnly {
		t.Errorf("service %s: root file system not read_only", s.Name)
	}
	if !slices.Contains(s.CapDrop, "ALL") {
		t.Errorf("service %s: cap_drop %v; want ALL", s.Name, s.CapDrop)
	}
	if !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
		t.Errorf("service %s: security_opt %v; want no-new-privileges:true", s.Name, s.SecurityOpt)
	}
	hc := s.HealthCheck
	if hc == nil || hc.Disable || len(hc.Test) < 2 {
		t.Errorf("service %s: no health check", s.Name)
	} else if test := strings.Join(hc.Test, " "); !strings.Contains(test, "/ready") || !strings.Contains(test, "8080") {
		t.Errorf("service %s: health check %q does not ask /ready on port 8080", s.Name, test)
	}
}

// checkComposeFrontendConfigs validates the front end's configs with
// omnistage route, one by one and together, and checks that each runs a
// built-in pipeline (the one its stage servers run) with every stage
// placement remote on that stage's service. It returns the built-in
// pipelines' routes, in the order of the front end's --config flags.
func checkComposeFrontendConfigs(t *testing.T, p *types.Project, fe types.ServiceConfig, byStage map[stageKey]types.ServiceConfig) []routeJSON {
	t.Helper()
	var files []string
	var pipelines []routeJSON
	for _, path := range argValues(fe.Command, "--config") {
		file := composeConfigFile(t, p, fe, path)
		files = append(files, file)
		got := route(t, file)
		want := route(t, "builtin:"+got.Name)
		pipelines = append(pipelines, want)
		if !reflect.DeepEqual(got.stages(), want.stages()) || !slices.Equal(got.Route, want.Route) {
			t.Errorf("%s runs route %v with stages %+v; the stage servers run builtin:%s, route %v with stages %+v", file, got.Route, got.stages(), got.Name, want.Route, want.stages())
		}
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		cfg := parseConfig(t, file, string(text))
		if !reflect.DeepEqual(cfg.Pipeline, builtinPipeline(t, got.Name)) {
			t.Errorf("%s: its pipeline section differs from internal/pipeline/builtin/%s.yaml's, which the stage servers run: they would refuse its payloads", file, got.Name)
		}
		for _, id := range want.onRoute() {
			e, ok := cfg.entry(id)
			wantURL := fmt.Sprintf("http://%s:8080", byStage[stageKey{got.Name, id}].Name)
			switch {
			case !ok:
				t.Errorf("%s: no deploy entry for stage %d", file, id)
			case e.Placement != "remote" || !slices.Equal(e.Endpoints, []string{wantURL}):
				t.Errorf("%s: stage %d is %s at %v; want remote at [%s]", file, id, e.Placement, e.Endpoints, wantURL)
			case e.APIKeyFile != composeAPIKey:
				t.Errorf("%s: stage %d api_key_file %q; want %s, where the api-key secret is", file, id, e.APIKeyFile, composeAPIKey)
			}
			svc := byStage[stageKey{got.Name, id}]
			if hosts, _ := argValue(svc.Command, "--allowed-hosts"); !slices.Contains(strings.Split(hosts, ","), svc.Name) {
				t.Errorf("service %s: --allowed-hosts %q does not hold %s, the name the front end calls it by (it would answer 403 forbidden_host)", svc.Name, hosts, svc.Name)
			}
		}
	}
	if len(files) == 0 {
		t.Fatalf("front end %s: no --config", fe.Name)
	}
	routes(t, files...) // the names are unique across them
	return pipelines
}

// composeConfigFile returns the file of the compose config a service
// mounts at path.
func composeConfigFile(t *testing.T, p *types.Project, s types.ServiceConfig, path string) string {
	t.Helper()
	for _, c := range s.Configs {
		if c.Target == path {
			return p.Configs[c.Source].File
		}
	}
	t.Fatalf("service %s: --config %s is not the target of one of its configs (%+v)", s.Name, path, s.Configs)
	return ""
}

// TestComposeServes runs every service of compose.yaml on this machine as
// compose runs it (its command, its configs and secrets where compose
// mounts them, each service's name made the loopback address of its
// server), and checks that the front end serves both pipelines through
// the stage servers.
func TestComposeServes(t *testing.T) {
	p := loadComposeWithKeys(t)
	files := map[string]string{}
	var servers []localServer
	for _, s := range p.Services {
		for _, c := range s.Configs {
			text, err := os.ReadFile(p.Configs[c.Source].File)
			if err != nil {
				t.Fatal(err)
			}
			files[c.Target] = string(text)
		}
		for _, sec := range s.Secrets {
			files["/run/secrets/"+sec.Source] = composeKeys[p.Secrets[sec.Source].Environment]
		}
		servers = append(servers, localServer{name: s.Name, args: s.Command, urls: []string{"http://" + s.Name + ":8080"}})
	}
	_, fe := composeServers(t, p)
	defaultModel, _ := argValue(fe.Command, "--default-model")
	checkServes(t, runLocally(t, files, servers), composeKeys["OMNISTAGE_API_KEY"], defaultModel)
}

// TestComposeHealthCheck runs compose.yaml's health check command, as the
// container would, against a server on a loopback port: it must fail while
// nothing listens and while /ready answers 503, and pass once a stage server
// is ready.
func TestComposeHealthCheck(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not found")
	}
	p := loadCompose(t)
	hc := p.Services["tts-vocoder"].HealthCheck
	if hc == nil || len(hc.Test) < 2 || hc.Test[0] != "CMD" {
		t.Fatalf("tts-vocoder: health check %v; want [CMD ...]", hc)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close()
	port := strconv.Itoa(addr.Port)
	check := func() error {
		args := slices.Clone(hc.Test[1:])
		for i := range args {
			args[i] = strings.ReplaceAll(args[i], "8080", port)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if check() == nil {
		t.Fatalf("the health check passes with no server on port %s", port)
	}

	// A server that is not ready yet answers 503.
	notReady := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error": {"code": "not_ready"}}`, http.StatusServiceUnavailable)
	})}
	ln, err = net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = notReady.Serve(ln) }()
	err = check()
	_ = notReady.Close()
	if err == nil {
		t.Fatal("the health check passes while /ready answers 503")
	}

	srv := exec.Command(omnistage(t), "serve", "--stage", "1", "--addr", addr.String())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the health check still fails 30s after the stage server started: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
