package deploy

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
)

// baseImagePackages are in debian:bookworm-slim already: the runtime stage
// need not install them.
var baseImagePackages = []string{"libc6", "libgcc-s1", "libstdc++6"}

// buildTools are the packages of scripts/install-deps.sh besides the -dev
// ones that a cgo build needs.
var buildTools = []string{"build-essential", "pkg-config"}

// dockerfile is the parsed Dockerfile: its stages, build first and runtime
// last.
type dockerfile struct {
	stages []instructions.Stage
}

// parseDockerfile parses ../Dockerfile with BuildKit's parser and fails the
// test on any parse or lint warning.
func parseDockerfile(t *testing.T) dockerfile {
	t.Helper()
	res, err := parser.Parse(strings.NewReader(readFile(t, "Dockerfile")))
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile:%d: %s", w.Location.Start.Line, w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, description, url, msg string, loc []parser.Range) {
		line := 0
		if len(loc) > 0 {
			line = loc[0].Start.Line
		}
		t.Errorf("Dockerfile:%d: lint %s: %s", line, rule, msg)
	}})
	stages, _, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("Dockerfile: %v", err)
	}
	return dockerfile{stages: stages}
}

// stage returns the stage named name.
func (d dockerfile) stage(t *testing.T, name string) *instructions.Stage {
	t.Helper()
	for i := range d.stages {
		if d.stages[i].Name == name {
			return &d.stages[i]
		}
	}
	t.Fatalf("Dockerfile: no stage named %q", name)
	return nil
}

// runtime returns the last stage, the image's.
func (d dockerfile) runtime() *instructions.Stage { return &d.stages[len(d.stages)-1] }

// commands returns the commands of type C in s, in order.
func commands[C instructions.Command](s *instructions.Stage) []C {
	var out []C
	for _, c := range s.Commands {
		if c, ok := c.(C); ok {
			out = append(out, c)
		}
	}
	return out
}

// aptInstalls returns the packages that the RUN commands of s install with
// apt-get install (or apt install), without version pins.
func aptInstalls(s *instructions.Stage) []string {
	var pkgs []string
	for _, run := range commands[*instructions.RunCommand](s) {
		words := strings.Fields(strings.Join(run.CmdLine, " "))
		for i := 0; i < len(words); i++ {
			if words[i] != "apt-get" && words[i] != "apt" {
				continue
			}
			j := i + 1
			for j < len(words) && strings.HasPrefix(words[j], "-") {
				j++
			}
			if j >= len(words) || words[j] != "install" {
				continue
			}
			for j++; j < len(words); j++ {
				w := words[j]
				if w == "&&" || w == "||" || w == ";" || w == "|" {
					break
				}
				if strings.HasPrefix(w, "-") {
					continue
				}
				w, end := strings.CutSuffix(w, ";")
				if name, _, _ := strings.Cut(w, "="); name != "" {
					pkgs = append(pkgs, name)
				}
				if end {
					break
				}
			}
			i = j
		}
	}
	return pkgs
}

// installDepsPackages returns the packages scripts/install-deps.sh
// installs: its packages=(...) line.
func installDepsPackages(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^packages=\(([^)]*)\)`)
	m := re.FindStringSubmatch(readFile(t, "scripts/install-deps.sh"))
	if m == nil {
		t.Fatal("scripts/install-deps.sh: no packages=(...) line")
	}
	pkgs := strings.Fields(m[1])
	if len(pkgs) == 0 {
		t.Fatal("scripts/install-deps.sh: packages=() is empty")
	}
	return pkgs
}

func TestDockerfileStages(t *testing.T) {
	d := parseDockerfile(t)
	if len(d.stages) < 2 {
		t.Fatalf("Dockerfile has %d stage(s); want a build stage and a runtime stage", len(d.stages))
	}
	build, rt := d.stage(t, "build"), d.runtime()
	if rt == build {
		t.Fatal("the runtime stage (the last) is the build stage")
	}
	buildBase := regexp.MustCompile(`^(golang:[0-9.]+-bookworm|debian:bookworm)(@sha256:[0-9a-f]{64})?$`)
	if !buildBase.MatchString(build.BaseName) {
		t.Errorf("build stage FROM %s; want golang:<version>-bookworm or debian:bookworm", build.BaseName)
	}
	runtimeBase := regexp.MustCompile(`^debian:bookworm-slim(@sha256:[0-9a-f]{64})?$`)
	if !runtimeBase.MatchString(rt.BaseName) {
		t.Errorf("runtime stage FROM %s; want debian:bookworm-slim", rt.BaseName)
	}

	users := commands[*instructions.UserCommand](rt)
	if len(users) == 0 {
		t.Error("runtime stage has no USER: the image would run as root")
	} else {
		user := users[len(users)-1].User
		uid, gid, _ := strings.Cut(user, ":")
		n, err := strconv.Atoi(uid)
		switch {
		case err != nil:
			t.Errorf("USER %s: want a numeric uid, which Kubernetes' runAsNonRoot can verify", user)
		case n == 0:
			t.Errorf("USER %s is root", user)
		}
		if gid != "" {
			if _, err := strconv.Atoi(gid); err != nil {
				t.Errorf("USER %s: want a numeric gid", user)
			}
		}
	}

	entry := commands[*instructions.EntrypointCommand](rt)
	if len(entry) == 0 {
		t.Fatal("runtime stage has no ENTRYPOINT")
	}
	e := entry[len(entry)-1]
	if e.PrependShell || len(e.CmdLine) != 1 || filepath.Base(e.CmdLine[0]) != "omnistage" {
		t.Errorf("ENTRYPOINT %v (shell form %v); want [\"omnistage\"] in exec form", e.CmdLine, e.PrependShell)
	}
	cmds := commands[*instructions.CmdCommand](rt)
	if len(cmds) == 0 {
		t.Fatal("runtime stage has no CMD")
	}
	if c := cmds[len(cmds)-1]; c.PrependShell || !slices.Equal(c.CmdLine, []string{"serve", "--addr", "0.0.0.0:8080"}) {
		t.Errorf("CMD %v; want [\"serve\", \"--addr\", \"0.0.0.0:8080\"]: in a container the server must listen on every address", c.CmdLine)
	}

	// The binary comes from the build stage, into a directory on PATH.
	copied := false
	for _, c := range commands[*instructions.CopyCommand](rt) {
		if c.From == build.Name && slices.Contains([]string{"/usr/local/bin/omnistage", "/usr/local/bin/", "/usr/bin/omnistage"}, c.DestPath) {
			copied = true
		}
	}
	if !copied {
		t.Errorf("runtime stage does not COPY --from=%s the binary to /usr/local/bin/omnistage", build.Name)
	}

	// The build compiles cmd/omnistage with cgo.
	built := false
	for _, run := range commands[*instructions.RunCommand](build) {
		line := strings.Join(run.CmdLine, " ")
		if strings.Contains(line, "go build") && strings.Contains(line, "./cmd/omnistage") && strings.Contains(line, "CGO_ENABLED=1") {
			built = true
		}
	}
	if !built {
		t.Error("build stage has no RUN with CGO_ENABLED=1 go build ... ./cmd/omnistage")
	}
}

// TestDockerfilePackages checks the stages' apt packages against
// scripts/install-deps.sh: the build stage installs every -dev package and
// build tool it lists, the runtime stage no -dev package but the acoustic
// model and CA certificates.
func TestDockerfilePackages(t *testing.T) {
	d := parseDockerfile(t)
	build, rt := aptInstalls(d.stage(t, "build")), aptInstalls(d.runtime())
	for _, p := range installDepsPackages(t) {
		if (strings.HasSuffix(p, "-dev") || slices.Contains(buildTools, p)) && !slices.Contains(build, p) {
			t.Errorf("scripts/install-deps.sh installs %s, the build stage does not (it installs %v)", p, build)
		}
	}
	for _, p := range []string{"pocketsphinx-en-us", "ca-certificates"} {
		if !slices.Contains(rt, p) {
			t.Errorf("the runtime stage does not install %s (it installs %v)", p, rt)
		}
	}
	for _, p := range rt {
		if strings.HasSuffix(p, "-dev") || slices.Contains(buildTools, p) {
			t.Errorf("the runtime stage installs %s, which only a build needs", p)
		}
	}
}

// TestDockerfileRuntimeLibraries checks that every shared library a freshly
// built omnistage links against (ldd), and every one ONNX Runtime's library
// (which it loads at run time) links against, comes from a package the
// runtime stage installs, itself or as a dependency of one it names (apt
// installs those), or from the base image.
func TestDockerfileRuntimeLibraries(t *testing.T) {
	for _, tool := range []string{"ldd", "dpkg", "dpkg-query"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: this check runs on Debian", tool)
		}
	}
	objects := []string{omnistage(t)}
	if ort := onnxRuntimeLibrary(t); fileExists(ort) {
		objects = append(objects, ort)
	} else {
		t.Errorf("%s is not installed: scripts/install-deps.sh installs it", ort)
	}
	rt := aptInstalls(parseDockerfile(t).runtime())
	installed := dependencyClosure(t, rt)

	var libs []string
	for _, obj := range objects {
		out, err := exec.Command("ldd", obj).CombinedOutput()
		if err != nil {
			t.Fatalf("ldd %s: %v\n%s", obj, err, out)
		}
		l := lddPaths(string(out))
		if len(l) == 0 {
			t.Fatalf("ldd found no libraries in %s:\n%s", obj, out)
		}
		for _, lib := range l {
			if !slices.Contains(libs, lib) {
				libs = append(libs, lib)
			}
		}
	}
	missing := map[string][]string{} // package -> its libraries
	var order []string
	for _, lib := range libs {
		pkg, err := ownerPackage(lib)
		if err != nil {
			t.Errorf("%s: %v", lib, err)
			continue
		}
		switch {
		case slices.Contains(baseImagePackages, pkg):
		case installed[pkg]:
			t.Logf("%s: %s", lib, pkg)
		default:
			if missing[pkg] == nil {
				order = append(order, pkg)
			}
			missing[pkg] = append(missing[pkg], lib)
		}
	}
	for _, pkg := range order {
		t.Errorf("omnistage or ONNX Runtime links %s from package %s, which the runtime stage does not install: add %s to its apt-get install",
			strings.Join(missing[pkg], ", "), pkg, pkg)
	}
}

// TestDockerfileRuntimeCommands checks that every command the server runs
// by name (exec.LookPath or exec.Command with a literal name, in the non-test
// sources of the packages it links) comes from a package the runtime stage
// installs: ffmpeg, for one, encodes aac.
func TestDockerfileRuntimeCommands(t *testing.T) {
	for _, tool := range []string{"dpkg", "dpkg-query"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: this check runs on Debian", tool)
		}
	}
	names := execNames(t)
	if len(names) == 0 {
		t.Log("the server runs no command by name")
	}
	installed := dependencyClosure(t, aptInstalls(parseDockerfile(t).runtime()))
	for _, name := range names {
		path, err := exec.LookPath(name)
		if err != nil {
			t.Errorf("the server runs %s, which is not installed here: scripts/install-deps.sh should install it", name)
			continue
		}
		pkg, err := ownerPackage(path)
		switch {
		case err != nil:
			t.Errorf("the server runs %s: %v", name, err)
		case !installed[pkg]:
			t.Errorf("the server runs %s (%s, package %s), which the runtime stage does not install: add %s to its apt-get install", name, path, pkg, pkg)
		default:
			t.Logf("%s: %s", name, pkg)
		}
	}
}

// execNames returns the commands that the non-test Go sources of the
// packages the server's binary links (cmd/omnistage and what it imports
// from this module) run by a literal name; test helpers that are not test
// files (internal/testkit) are not linked, so not counted.
func execNames(t *testing.T) []string {
	t.Helper()
	list := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", "./cmd/omnistage")
	list.Dir = repoRoot
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/omnistage: %v", err)
	}
	re := regexp.MustCompile(`exec\.(?:LookPath\(|Command\(|CommandContext\([A-Za-z_][A-Za-z0-9_.]*, )"([^"/]+)"`)
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, dir := range strings.Fields(string(out)) {
		if !strings.HasPrefix(dir, root+string(filepath.Separator)) {
			continue // another module's
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				seen[m[1]] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// lddPaths returns the paths of the libraries in ldd's output.
func lddPaths(out string) []string {
	var paths []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=>"); ok {
			if f := strings.Fields(after); len(f) > 0 && strings.HasPrefix(f[0], "/") {
				paths = append(paths, f[0])
			}
		} else if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "/") {
			paths = append(paths, f[0]) // the dynamic loader
		}
	}
	return paths
}

// ownerPackage returns the Debian package that ships lib, trying the path
// ldd printed, its target (alternatives and soname links), and both with
// /usr in front (merged /usr: dpkg knows one of the two spellings).
func ownerPackage(lib string) (string, error) {
	candidates := []string{lib}
	if real, err := filepath.EvalSymlinks(lib); err == nil && real != lib {
		candidates = append(candidates, real)
	}
	for _, c := range slices.Clone(candidates) {
		if !strings.HasPrefix(c, "/usr/") {
			candidates = append(candidates, "/usr"+c)
		}
	}
	for _, c := range candidates {
		out, err := exec.Command("dpkg", "-S", c).Output()
		if err != nil {
			continue
		}
		// "libflite1:amd64: /usr/lib/x86_64-linux-gnu/libflite.so.2.2"
		line, _, _ := strings.Cut(string(out), "\n")
		pkg, _, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		pkg, _, _ = strings.Cut(pkg, ",") // a path some packages share
		pkg, _, _ = strings.Cut(pkg, ":") // the architecture
		return strings.TrimSpace(pkg), nil
	}
	return "", fmt.Errorf("dpkg -S finds no package for any of %v", candidates)
}

// dependencyClosure returns pkgs and, recursively, every installed package
// they depend on (Depends and Pre-Depends, every alternative), as dpkg
// records them on this machine. apt installs those with the named ones.
func dependencyClosure(t *testing.T, pkgs []string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	next := slices.Clone(pkgs)
	for len(next) > 0 {
		var ask []string
		for _, p := range next {
			if !seen[p] {
				seen[p] = true
				ask = append(ask, p)
			}
		}
		next = nil
		if len(ask) == 0 {
			break
		}
		// dpkg-query exits non-zero when some package is not installed
		// here; it still prints the others.
		args := append([]string{"-W", "-f=${Depends}, ${Pre-Depends}\n"}, ask...)
		out, _ := exec.Command("dpkg-query", args...).Output()
		for _, dep := range strings.FieldsFunc(string(out), func(r rune) bool { return r == ',' || r == '|' || r == '\n' }) {
			name, _, _ := strings.Cut(strings.TrimSpace(dep), " ")
			name, _, _ = strings.Cut(name, ":")
			if name != "" && !seen[name] {
				next = append(next, name)
			}
		}
	}
	return seen
}

// TestDockerignore checks that .dockerignore keeps the repository's history,
// build outputs and test artefacts out of the build context, and keeps in
// what the build needs.
func TestDockerignore(t *testing.T) {
	f, err := os.Open(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatalf(".dockerignore: %v", err)
	}
	tests := []struct {
		path     string
		excluded bool
	}{
		{".git/HEAD", true},
		{".git", true},
		{"bin/omnistage", true},
		{"bin/staticcheck", true},
		{"internal/api/api.test", true},
		{"omnistage.test", true},
		{"cpu.prof", true},
		{"internal/stageserver/mem.prof", true},
		{"bench.txt", true},
		{"hello.wav", true},
		{".env", true},
		{"go.mod", false},
		{"go.sum", false},
		{"cmd/omnistage/main.go", false},
		{"internal/pipeline/builtin/tts.yaml", false},
		{"internal/engine/flite/flite.go", false},
		{"third_party/onnxruntime/LICENSE", false},
		{"third_party/ppocr/NOTICE", false},
	}
	for _, tt := range tests {
		got, err := pm.MatchesOrParentMatches(tt.path)
		if err != nil {
			t.Fatalf(".dockerignore: %v", err)
		}
		if got != tt.excluded {
			verb := "keeps"
			if got {
				verb = "excludes"
			}
			t.Errorf(".dockerignore %s %s; want excluded=%v", verb, tt.path, tt.excluded)
		}
	}
}
