package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
// unprivileged container with a writable /tmp, and GOMEMLIMIT below its
// memory limit.
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
	checkGoMemLimit(t, s)
}

// checkNetworkPolicy checks that a NetworkPolicy covers every stage
// server's pods and admits only the front end's.
func checkNetworkPolicy(t *testing.T, m *manifests, stages map[stageKey]server, front server) {
	t.Helper()
	for _, s := range stages {
		id := s.stage
		var covering []*networkingv1.NetworkPolicy
		for _, np := range m.netpols {
			if sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err == nil && len(np.Spec.PodSelector.MatchLabels)+len(np.Spec.PodSelector.MatchExpressions) > 0 && sel.Matches(s.podLabels) && slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
				covering = append(covering, np)
			}
		}
		if len(covering) == 0 {
			t.Errorf("no NetworkPolicy restricts ingress to the pods of %s (Deployment %s)", id, s.d.Name)
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

// checkGoMemLimit checks a server's GOMEMLIMIT, as the kubelet sets it: a
// value Go accepts; when it comes from the memory limit, between 90% and
// 100% of it; none derived from a limit the container does not have, and
// none missing where it has one.
func checkGoMemLimit(t *testing.T, s server) {
	t.Helper()
	env, fromLimit := containerEnv(t, s.c)
	limit := s.c.Resources.Limits.Memory().Value()
	v, ok := env["GOMEMLIMIT"]
	switch {
	case !ok && limit > 0:
		t.Errorf("Deployment %s: memory limit %s but no GOMEMLIMIT: Go's heap would grow past it before collecting", s.d.Name, s.c.Resources.Limits.Memory())
		return
	case !ok:
		return
	}
	n, ok := goMemLimitBytes(v)
	switch {
	case !ok:
		t.Errorf("Deployment %s: GOMEMLIMIT %q is no byte count Go accepts", s.d.Name, v)
	case !fromLimit["GOMEMLIMIT"]:
	case limit == 0:
		t.Errorf("Deployment %s: GOMEMLIMIT %q derives from a memory limit the container does not have (the Downward API would give the node's memory)", s.d.Name, v)
	case n > limit || float64(n) < 0.9*float64(limit):
		t.Errorf("Deployment %s: GOMEMLIMIT %q is %d bytes, %.1f%% of the memory limit %d; want 90%% to 100%%", s.d.Name, v, n, 100*float64(n)/float64(limit), limit)
	}
}

// envRef is a reference to another variable in an env value.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// containerEnv returns a container's environment as the kubelet makes it:
// resourceFieldRef values from the container's limits divided by the
// divisor and rounded up, $(NAME) in a value replaced by an earlier
// variable's. fromLimit tells which variables come from a memory limit.
func containerEnv(t *testing.T, c corev1.Container) (env map[string]string, fromLimit map[string]bool) {
	t.Helper()
	env, fromLimit = map[string]string{}, map[string]bool{}
	for _, e := range c.Env {
		switch ref := e.ValueFrom; {
		case ref == nil:
			env[e.Name] = envRef.ReplaceAllStringFunc(e.Value, func(r string) string {
				name := envRef.FindStringSubmatch(r)[1]
				v, ok := env[name]
				if !ok {
					t.Errorf("container %s: %s refers to %s, which no earlier variable defines", c.Name, e.Name, r)
					return r
				}
				fromLimit[e.Name] = fromLimit[e.Name] || fromLimit[name]
				return v
			})
		case ref.ResourceFieldRef != nil && ref.ResourceFieldRef.Resource == "limits.memory":
			f := ref.ResourceFieldRef
			if f.ContainerName != "" && f.ContainerName != c.Name {
				t.Errorf("container %s: %s reads the memory limit of container %s", c.Name, e.Name, f.ContainerName)
			}
			divisor := int64(1)
			if !f.Divisor.IsZero() {
				divisor = f.Divisor.Value()
			}
			limit := c.Resources.Limits.Memory().Value()
			env[e.Name] = strconv.FormatInt(int64(math.Ceil(float64(limit)/float64(divisor))), 10)
			fromLimit[e.Name] = limit > 0
		default:
			t.Errorf("container %s: %s comes from %+v, which these tests do not resolve", c.Name, e.Name, ref)
		}
	}
	return env, fromLimit
}

// goMemLimitBytes reads a GOMEMLIMIT value as Go does: a byte count with
// an optional unit (B, KiB, MiB, GiB, TiB), or off (no limit).
func goMemLimitBytes(v string) (int64, bool) {
	if v == "off" {
		return math.MaxInt64, true
	}
	unit := int64(1)
	for i, suffix := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if s, ok := strings.CutSuffix(v, suffix); ok {
			v, unit = s, 1<<(10*(i+1))
			break
		}
	}
	v = strings.TrimSuffix(v, "B")
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n > math.MaxInt64/unit {
		return 0, false
	}
	return n * unit, true
}
