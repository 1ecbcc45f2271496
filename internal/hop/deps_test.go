package hop

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBelowTheOrchestrator holds the layout: the hop client and the
// placements are the bottom of the data flow, which the orchestrator
// calls, so neither depends on it (the stage server, which calls the
// orchestrator, is internal/stageserver).
func TestBelowTheOrchestrator(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = "/usr/local/go/bin/go" // where the README installs Go
	}
	const mod = "github.com/omnistage/omnistage/internal/"
	out, err := exec.Command(goCmd, "list", "-deps", "-f", "{{.ImportPath}}", mod+"hop", mod+"placement/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == mod+"orchestrator" || strings.HasPrefix(p, mod+"orchestrator/") || p == mod+"stageserver" {
			t.Errorf("the hop client or a placement depends on %s", p)
		}
	}
}
