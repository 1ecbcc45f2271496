package acceptance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/testdeps"
	"github.com/omnistage/omnistage/internal/testkit"
)

// readmeSection returns the code blocks of the README's section with the
// given heading, in order.
func readmeSection(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("the README has no section %q", heading)
	}
	text = text[i+len(heading)+2:]
	if j := strings.Index(text, "\n#"); j >= 0 {
		text = text[:j]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```[a-z]*\n(.*?)```").FindAllStringSubmatch(text, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// host is a network namespace standing for a machine of its own.
type host struct {
	ns  string
	dir string // its working directory
}

// command returns a shell command line for h, in its directory, with omnistage
// being the binary under test.
func (h host) command(line string) *exec.Cmd {
	cmd := exec.Command("ip", "netns", "exec", h.ns, "sh", "-c", line)
	cmd.Dir = h.dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin.path)+":"+os.Getenv("PATH"))
	return cmd
}

// twoHosts makes two network namespaces joined by a link: A at 10.0.0.7,
// the address the README's example uses, and B at 10.0.0.8. They go when
// the test ends.
func twoHosts(t *testing.T) (a, b host) {
	t.Helper()
	if os.Geteuid() != 0 {
		testdeps.Missing(t, "network namespaces need root (CI runs as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testdeps.Missing(t, "no ip command (Debian package iproute2)")
	}
	tag := fmt.Sprintf("om%d", os.Getpid()%100000)
	a, b = host{ns: tag + "a", dir: t.TempDir()}, host{ns: tag + "b", dir: t.TempDir()}
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", a.ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", a.ns).Run() })
	ip("netns", "add", b.ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", b.ns).Run() })
	ip("link", "add", a.ns+"v", "netns", a.ns, "type", "veth", "peer", "name", b.ns+"v", "netns", b.ns)
	for _, h := range []struct {
		host
		addr string
	}{{a, "10.0.0.7/24"}, {b, "10.0.0.8/24"}} {
		ip("-n", h.ns, "addr", "add", h.addr, "dev", h.ns+"v")
		ip("-n", h.ns, "link", "set", h.ns+"v", "up")
		ip("-n", h.ns, "link", "set", "lo", "up")
	}
	return a, b
}

// TestReadmeTwoHosts runs the README's two-host example as written, on two
// network namespaces standing for the two machines: host A, at the
// address the README gives, runs its two stage servers; host B runs the
// front end with the README's front.yaml and the README's curl command,
// and the answer is speech.
func TestReadmeTwoHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers with the real engines")
	}
	omnistage(t)
	a, b := twoHosts(t)
	blocks := readmeSection(t, "### Two hosts")
	if len(blocks) != 3 {
		t.Fatalf("the section has %d code blocks, want 3 (host A's shells, front.yaml, host B's shell)", len(blocks))
	}
	// The key, made as the README says, on both hosts.
	for _, h := range []host{a, b} {
		if out, err := h.command("openssl rand -hex 32 > key").CombinedOutput(); err != nil {
			t.Fatalf("openssl: %v\n%s", err, out)
		}
	}
	key, _ := os.ReadFile(filepath.Join(a.dir, "key"))
	if err := os.WriteFile(filepath.Join(b.dir, "key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	background := func(h host, line string) {
		t.Helper()
		cmd := h.command("exec " + line)
		out := &testkit.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			if t.Failed() {
				t.Logf("%s on %s:\n%s", line, h.ns, out)
			}
		})
	}
	ready := func(h host, url string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for h.command("curl -sf -o /dev/null "+url+"/ready").Run() != nil {
			if time.Now().After(deadline) {
				t.Fatalf("%s on %s not ready after 2 minutes", url, h.ns)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(blocks[0]), "\n") {
		background(a, line)
	}
	ready(a, "http://127.0.0.1:8100")
	ready(a, "http://127.0.0.1:8101")

	if err := os.WriteFile(filepath.Join(b.dir, "front.yaml"), []byte(blocks[1]), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(blocks[2]), "\n")
	if len(lines) != 2 {
		t.Fatalf("host B's block has %d lines, want the server and the request", len(lines))
	}
	background(b, lines[0])
	ready(b, "http://127.0.0.1:8080")
	if out, err := b.command(lines[1]).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", lines[1], err, out)
	}
	got := readWAV(t, filepath.Join(b.dir, "hello.wav"))
	heard := recognize(t, got)
	t.Logf("hello.wav: %.2f s at %d Hz; heard %q", seconds(got), got.SampleRate, heard)
	if seconds(got) < 1 || !strings.Contains(heard, "hello") || !strings.Contains(heard, "machine") {
		t.Errorf("hello.wav: %.2f s, heard %q; want about 2 s of \"hello from the other machine\"", seconds(got), heard)
	}
}
