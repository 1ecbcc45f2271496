package browser

// The browser: headless chromium, started per test, and the log of what
// the page did in it.

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/omnistage/omnistage/internal/testdeps"
)

// pageLog records what the page did that the test checks at the end.
type pageLog struct {
	mu       sync.Mutex
	errors   []string // console errors and uncaught exceptions
	requests []string // the URL of every request
	failed   []string // page files that did not load
}

// record is the browser's event listener; it must return fast.
func (p *pageLog) record(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			p.errors = append(p.errors, "console."+string(ev.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		p.errors = append(p.errors, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	case *log.EventEntryAdded:
		// The browser logs every 4xx answer as an error: the API's are the
		// errors this test provokes, and their messages are checked on the
		// page; any other is a page file that did not load.
		e := ev.Entry
		if e.Level == log.EntryLevelError && !(e.Source == log.EntrySourceNetwork && isAPI(e.URL)) {
			p.errors = append(p.errors, fmt.Sprintf("browser log (%s): %s %s", e.Source, e.Text, e.URL))
		}
	case *network.EventRequestWillBeSent:
		p.requests = append(p.requests, ev.Request.URL)
	case *network.EventResponseReceived:
		if r := ev.Response; r.Status >= 400 && !isAPI(r.URL) {
			p.failed = append(p.failed, fmt.Sprintf("%s: %d", r.URL, r.Status))
		}
	}
}

// isAPI reports whether u is an API call of the page, not one of its files.
func isAPI(u string) bool {
	pu, err := url.Parse(u)
	return err == nil && strings.HasPrefix(pu.Path, "/v1/")
}

// check fails the test on a console error, an exception, a page file that
// did not load, or a request to a host other than hosts.
func (p *pageLog) check(t *testing.T, hosts ...string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.errors {
		t.Errorf("page: %s", e)
	}
	for _, f := range p.failed {
		t.Errorf("page file did not load: %s", f)
	}
	if len(p.requests) == 0 {
		t.Error("saw no request: the network listener is broken")
	}
	for _, r := range p.requests {
		u, err := url.Parse(r)
		if err != nil {
			t.Errorf("request to %q: %v", r, err)
			continue
		}
		switch u.Scheme {
		case "data", "blob":
			continue
		}
		if !slices.Contains(hosts, u.Host) {
			t.Errorf("request to %s: a host other than the servers (%s)", r, strings.Join(hosts, ", "))
		}
	}
}

// newBrowser starts headless chromium, with every event of its tab going
// to p, and stops it when the test ends.
func newBrowser(t *testing.T, execPath string, p *pageLog) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(execPath),
		chromedp.WindowSize(int(desktop.width), int(desktop.height)),
		// Web Audio starts without a click; the test clicks anyway.
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses root otherwise
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Listen(ctx, p.record); err != nil {
		t.Fatalf("starting %s: %v", execPath, err)
	}
	return ctx
}

// findChromium returns the path of Debian's chromium, or skips the test.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testdeps.Missing(t, "chromium is not installed: scripts/install-deps.sh installs it (apt-get install chromium)")
	return ""
}
