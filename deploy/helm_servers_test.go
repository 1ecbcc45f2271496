package deploy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// stageKey names a stage server by what it serves: a pipeline's stage.
type stageKey struct {
	pipeline string
	id       int
}

func (k stageKey) String() string { return fmt.Sprintf("%s stage %d", k.pipeline, k.id) }

// server is one omnistage server the chart runs: a Deployment, the stage it
// serves (pipeline "" and id -1 for the front end) and what its container
// says.
type server struct {
	d         *appsv1.Deployment
	c         corev1.Container
	stage     stageKey
	args      []string
	podLabels labels.Set
}

// servers returns the chart's servers: the stage servers by the stage they
// serve (their --pipeline and --stage), and the front end.
func (m *manifests) servers(t *testing.T) (stages map[stageKey]server, front server) {
	t.Helper()
	stages = map[stageKey]server{}
	fronts := 0
	for _, name := range slices.Sorted(maps.Keys(m.deployments)) {
		d := m.deployments[name]
		if n := len(d.Spec.Template.Spec.Containers); n != 1 {
			t.Fatalf("Deployment %s has %d containers; want 1", name, n)
		}
		s := server{d: d, c: d.Spec.Template.Spec.Containers[0], stage: stageKey{id: -1}, podLabels: d.Spec.Template.Labels}
		s.args = s.c.Args
		if len(s.args) == 0 || s.args[0] != "serve" {
			t.Fatalf("Deployment %s runs %v; want omnistage serve ...", name, s.args)
		}
		v, ok := argValue(s.args, "--stage")
		if !ok {
			front = s
			fronts++
			continue
		}
		if _, err := fmt.Sscan(v, &s.stage.id); err != nil {
			t.Fatalf("Deployment %s: --stage %q", name, v)
		}
		if s.stage.pipeline, ok = argValue(s.args, "--pipeline"); !ok || s.stage.pipeline == "" {
			t.Errorf("Deployment %s: serve --stage %s without --pipeline: which pipeline's stage it serves is left to the server's default", name, v)
		}
		if other, dup := stages[s.stage]; dup {
			t.Errorf("Deployments %s and %s both serve %s", other.d.Name, name, s.stage)
		}
		stages[s.stage] = s
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

// configFile returns the text of the one file a server's --config names,
// from the ConfigMap mounted there, and the ConfigMap key.
func (s server) configFile(t *testing.T, m *manifests) (text, key string) {
	t.Helper()
	files := argValues(s.args, "--config")
	if len(files) != 1 {
		t.Fatalf("Deployment %s: --config %v; want one file", s.d.Name, files)
	}
	return s.mountedConfig(t, m, files[0])
}

// mountedConfig returns the text of a config file in a server's container,
// from the ConfigMap mounted there, and the ConfigMap key.
func (s server) mountedConfig(t *testing.T, m *manifests, file string) (text, key string) {
	t.Helper()
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
