package acceptance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/audio"
	"github.com/omnistage/omnistage/internal/pipeline"
)

// rssSlack is how far above its warmed-up baseline a server's resident
// memory may stay once it is quiet after big requests. Without a trim
// they leave hundreds of megabytes; with one, a few megabytes.
const rssSlack = 64 << 20

// TestMemoryReturns sends two big allowed requests at once, then the
// amplification input ('99999 ' repeated to 10,000 characters, 73 minutes
// of speech) to a server with the default audio limit. It checks that each
// is answered as it should be, and that the server's resident memory comes
// back near its baseline once it is quiet (package memtrim).
func TestMemoryReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("synthesizes about 20 minutes of speech")
	}
	s := serve(t)
	pid := s.cmd.Process.Pid
	post := func(text string) (int, []byte) {
		t.Helper()
		body, _ := json.Marshal(apijson.SpeechRequest{Model: "tts-1", Input: text, ResponseFormat: "wav"})
		resp, err := http.Post(s.url+"/v1/audio/speech", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0, nil
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Error(err)
		}
		return resp.StatusCode, data
	}
	if code, data := post("A short sentence warms the talker and the vocoder up."); code != http.StatusOK {
		t.Fatalf("warm-up: %d %s", code, data)
	}
	base := procStatus(t, pid, "VmRSS")
	backToBase := func(what string) {
		t.Helper()
		answered := procStatus(t, pid, "VmRSS")
		t.Logf("after %s: peak %d MB, %d MB at the answer (baseline %d MB, slack %d MB)", what, procStatus(t, pid, "VmHWM")>>20, answered>>20, base>>20, rssSlack>>20)
		last := answered
		defer func() {
			if t.Failed() {
				t.Logf("resident memory last read: %d MB", last>>20)
			}
		}()
		took := within(t, 20*time.Second, "resident memory back near its baseline after "+what, func() bool {
			last = procStatus(t, pid, "VmRSS")
			return last <= base+rssSlack
		})
		t.Logf("%d MB %s later", last>>20, took.Round(time.Millisecond))
	}

	// Two big allowed requests at once: one sentence of about 260 s of
	// speech each.
	big := strings.Repeat("99999 ", 100)
	cpu := procCPU(t, pid)
	var wg sync.WaitGroup
	var audioSeconds [2]float64
	for i := range audioSeconds {
		wg.Go(func() {
			code, data := post(big)
			if code != http.StatusOK {
				t.Errorf("big request: %d %.300s", code, data)
				return
			}
			a, err := audio.ReadWAV(bytes.NewReader(data))
			if err != nil {
				t.Error(err)
				return
			}
			audioSeconds[i] = seconds(a)
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	bigCPU := procCPU(t, pid) - cpu
	perSecond := bigCPU / (audioSeconds[0] + audioSeconds[1])
	t.Logf("big requests: %.0f s and %.0f s of speech, %.1f s of CPU", audioSeconds[0], audioSeconds[1], bigCPU)
	backToBase("two big requests")

	// The amplification input is refused once it passes the limit, after
	// about the limit's worth of work: at most four times what the big
	// requests took per second of speech (the whole input makes 7.3 times
	// the limit).
	limit := pipeline.DefaultMaxAudioSeconds
	cpu = procCPU(t, pid)
	code, data := post(strings.Repeat("99999 ", 10000/6+1)[:10000])
	ampCPU := procCPU(t, pid) - cpu
	if code != http.StatusBadRequest || !bytes.Contains(data, []byte("max_audio_seconds")) {
		t.Fatalf("amplification input: %d %.300s; want a 400 naming deploy.max_audio_seconds", code, data)
	}
	t.Logf("amplification input refused after %.1f s of CPU; %d s of speech at the big requests' rate would take %.1f s", ampCPU, limit, perSecond*float64(limit))
	if bound := 4 * perSecond * float64(limit); ampCPU > bound {
		t.Errorf("the amplification input took %.1f s of CPU before its 400, more than %.1f s (4 × %d s of speech)", ampCPU, bound, limit)
	}
	backToBase("the amplification input")
}

// procStatus returns a size field of /proc/pid/status (VmRSS, VmHWM) in
// bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status: %s: %v", pid, field, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return 0
}

// procCPU returns the CPU time, user and system, process pid has used, in
// seconds.
func procCPU(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is the first, utime and stime the 12th and 13th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	var ticks float64
	for _, v := range f[11:13] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	// USER_HZ, which /proc counts in, is 100 on every Linux architecture
	// Go runs on.
	return ticks / 100
}
