package doccheck_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/doccheck"
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/engine/external"
	"github.com/omnistage/omnistage/internal/stagecheck"
	"github.com/omnistage/omnistage/internal/stageproto"
	"github.com/omnistage/omnistage/internal/subprocess"
)

// The tests below hold docs/stage-protocol.md, the stage protocol's
// reference, to the code that speaks it (package stageproto, the
// runtime's side in package engine/external, the check in package
// stagecheck): its version, message types, header fields, chunk kinds and
// their fields, error codes, limits, defaults and bounds, and the cases of
// the check.

const protocolDoc = "../../docs/stage-protocol.md"

// protocolText returns the doc's text.
func protocolText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the lines of the doc's section titled title ("## Jobs"),
// up to the next section.
func section(t *testing.T, text, title string) []string {
	t.Helper()
	lines := strings.Split(text, "\n")
	start := slices.Index(lines, title)
	if start < 0 {
		t.Fatalf("%s has no section %q", protocolDoc, title)
	}
	end := slices.IndexFunc(lines[start+1:], func(l string) bool { return strings.HasPrefix(l, "## ") })
	if end < 0 {
		return lines[start+1:]
	}
	return lines[start+1 : start+1+end]
}

// tableRows returns the cells of the rows of the first table in lines
// whose first cell is in backquotes, the backquotes dropped from it (its
// title row left out).
func tableRows(lines []string) [][]string {
	var rows [][]string
	for i, l := range lines {
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "| --") {
			continue
		}
		if !strings.HasPrefix(l, "| `") {
			if len(rows) > 0 && !strings.HasPrefix(l, "|") {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(l, "| "), " | ")
		cells[0] = strings.Trim(cells[0], "`")
		rows = append(rows, cells)
	}
	return rows
}

// TestDocProtocolVersion checks the version the doc is of against the one
// the runtime and the Python SDK speak.
func TestDocProtocolVersion(t *testing.T) {
	text := protocolText(t)
	m := regexp.MustCompile(`(?m)^# The omnistage stage protocol, version (\d+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%s: no title naming the version", protocolDoc)
	}
	if v, _ := strconv.Atoi(m[1]); v != stageproto.Version {
		t.Errorf("%s is of version %d; package stageproto speaks %d", protocolDoc, v, stageproto.Version)
	}
	if !strings.Contains(text, "This runtime speaks "+strconv.Itoa(stageproto.Version)+" ") {
		t.Errorf("%s does not say that the runtime speaks version %d", protocolDoc, stageproto.Version)
	}
	files, err := filepath.Glob("../../sdk/python/omnistage_stage/*.py")
	if err != nil || len(files) == 0 {
		t.Fatalf("the Python SDK's files: %v", err)
	}
	var defs []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^PROTOCOL_VERSION = (\d+)\b`).FindAllStringSubmatch(string(src), -1) {
			defs = append(defs, m[1])
		}
	}
	if !slices.Equal(defs, []string{strconv.Itoa(stageproto.Version)}) {
		t.Errorf("the Python SDK defines PROTOCOL_VERSION as %v; want it once, %d", defs, stageproto.Version)
	}
}

// TestDocMessageTypes checks that the doc shows a message of every type
// package stageproto declares, and of no other.
func TestDocMessageTypes(t *testing.T) {
	declared := map[string]bool{}
	for _, v := range doccheck.StringConstants(t, "../stageproto", "Type") {
		declared[v] = true
	}
	shown := map[string]bool{}
	for _, msg := range docMessages(t, protocolText(t)) {
		var h struct{ Type string }
		if err := json.Unmarshal([]byte(docPlaceholders.ReplaceAllString(msg, `: "$1"`)), &h); err != nil {
			t.Fatalf("%v\n%s", err, msg)
		}
		shown[h.Type] = true
	}
	for _, ty := range slices.Sorted(maps.Keys(declared)) {
		if !shown[ty] {
			t.Errorf("%s shows no %s message", protocolDoc, ty)
		}
	}
	for _, ty := range slices.Sorted(maps.Keys(shown)) {
		if !declared[ty] {
			t.Errorf("%s shows a %s message, a type package stageproto does not declare", protocolDoc, ty)
		}
	}
}

// docMessages returns the messages the doc shows: the JSON code blocks,
// the lines of the example session and the headers quoted in the text.
func docMessages(t *testing.T, text string) []string {
	t.Helper()
	var msgs []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == "```json":
			end := slices.IndexFunc(lines[i+1:], func(l string) bool { return strings.TrimSpace(l) == "```" })
			if end < 0 {
				t.Fatalf("%s: a JSON block does not end", protocolDoc)
			}
			msgs = append(msgs, strings.Join(lines[i+1:i+1+end], "\n"))
			i += end
		case strings.HasPrefix(l, "< {") || strings.HasPrefix(l, "> {"):
			msgs = append(msgs, l[2:])
		}
	}
	// Quoted in the text, a header may wrap over two lines.
	prose := regexp.MustCompile(`\s*\n\s*`).ReplaceAllString(text, " ")
	for _, m := range regexp.MustCompile("`(\\{\"type\": ?\"[^`]*\\})`").FindAllStringSubmatch(prose, -1) {
		msgs = append(msgs, m[1])
	}
	if len(msgs) < 20 {
		t.Fatalf("%s shows only %d messages", protocolDoc, len(msgs))
	}
	return msgs
}

// docPlaceholders are the values the doc's messages stand for with a
// letter (a code, a message), made strings for decoding.
var docPlaceholders = regexp.MustCompile(`: ([CM])\b`)

// TestDocHeaderFields checks every message the doc shows against the
// header the runtime reads (stageproto.Header): no field it does not have,
// each of the JSON type it has (C, M and 12 stand for values); and that
// the doc names every field the header has.
func TestDocHeaderFields(t *testing.T) {
	text := protocolText(t)
	for _, msg := range docMessages(t, text) {
		msg = docPlaceholders.ReplaceAllString(msg, `: "$1"`)
		dec := json.NewDecoder(strings.NewReader(msg))
		dec.DisallowUnknownFields()
		var h stageproto.Header
		if err := dec.Decode(&h); err != nil {
			t.Errorf("%s shows a message the runtime does not read as it reads: %v\n%s", protocolDoc, err, msg)
		}
	}
	for _, name := range jsonFields(reflect.TypeFor[stageproto.Header]()) {
		if !strings.Contains(text, `"`+name+`"`) && !strings.Contains(text, "`"+name+"`") {
			t.Errorf("%s does not name the header field %s", protocolDoc, name)
		}
	}
}

// jsonFields returns the JSON names of a struct type's fields, those of
// embedded structs included.
func jsonFields(typ reflect.Type) []string {
	var names []string
	for f := range typ.Fields() {
		if f.Anonymous {
			names = append(names, jsonFields(f.Type)...)
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// TestDocChunkKinds checks the table of kinds and chunks: a row for each
// built-in kind and one for the kinds a pipeline declares, each naming
// the header fields package stageproto gives a chunk of the kind.
func TestDocChunkKinds(t *testing.T) {
	full := []engine.Chunk{
		{Text: &engine.Text{Text: "Hi."}},
		{Audio: &engine.Audio{SampleRate: 16000, Samples: []int16{1}, EndOfSentence: true}},
		{Words: &engine.Words{Words: []engine.Word{{Word: "Hi"}}}},
		{Frames: &engine.Frames{Voice: "slt", Channels: 1, StrChannels: 1, FrameShift: 0.005, Params: []float32{1}, Str: []float32{1}}},
		{Segments: &engine.Segments{Voice: "kal", Names: []string{"pau"}, Ends: []float32{0.1}, Cluster: []bool{true}, TargetPos: []float32{0.05}, TargetF0: []float32{110}}},
		{Data: &engine.Data{Kind: "phonemes", Bytes: []byte("x"), Meta: map[string]string{"a": "b"}}},
		{Tensors: &engine.Tensors{Tensors: []engine.Tensor{engine.Float32Tensor("x", []int64{1}, []float32{1})}}},
		{Image: &engine.Image{Format: "png", Width: 1, Height: 1, Bytes: []byte("x")}},
		{Regions: &engine.Regions{Width: 1, Height: 1, Regions: []engine.Region{{Text: "a", Confidence: []float32{1}, Crop: &engine.Crop{Width: 1, Height: 1, Pixels: []byte{1, 2, 3}}}}}},
	}
	want := map[string][]string{}
	for _, c := range full {
		h, _, err := stageproto.EncodeChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(h)
		var fields map[string]any
		if err := json.Unmarshal(b, &fields); err != nil {
			t.Fatal(err)
		}
		delete(fields, "kind")
		kind := string(c.Kind())
		if c.Data != nil {
			kind = "declared"
		}
		want[kind] = slices.Sorted(maps.Keys(fields))
	}
	ident := regexp.MustCompile("`([a-z0-9_]+)`")
	got := map[string][]string{}
	for _, row := range tableRows(section(t, protocolText(t), "## Kinds and chunks")) {
		kind := row[0]
		if strings.Contains(kind, "kind the pipeline declares") {
			kind = "declared"
		}
		var fields []string
		if len(row) > 1 {
			for _, m := range ident.FindAllStringSubmatch(row[1], -1) {
				fields = append(fields, m[1])
			}
		}
		slices.Sort(fields)
		got[kind] = fields
	}
	if len(got) == 0 {
		t.Fatalf("%s has no table of kinds", protocolDoc)
	}
	for _, k := range engine.Kinds {
		if _, ok := got[string(k)]; !ok {
			t.Errorf("%s has no row for the built-in kind %s", protocolDoc, k)
		}
	}
	for kind, fields := range got {
		w, ok := want[kind]
		switch {
		case !ok:
			t.Errorf("%s has a row for kind %s, which is not built in", protocolDoc, kind)
		case !slices.Equal(fields, w):
			t.Errorf("%s gives a %s chunk the header fields %v; package stageproto gives it %v", protocolDoc, kind, fields, w)
		}
	}
}

// TestDocJobErrorCodes checks the table of a job's error codes against
// package stageproto's Code constants.
func TestDocJobErrorCodes(t *testing.T) {
	var rows []string
	for _, row := range tableRows(section(t, protocolText(t), "## Jobs")) {
		rows = append(rows, row[0])
	}
	declared := slices.Sorted(maps.Values(doccheck.CodeConstants(t, "../stageproto")))
	if slices.Sort(rows); !slices.Equal(rows, declared) {
		t.Errorf("%s lists the error codes %v; package stageproto has %v", protocolDoc, rows, declared)
	}
}

// TestDocBounds checks the limits, defaults and time bounds the doc gives
// against the code's.
func TestDocBounds(t *testing.T) {
	text := regexp.MustCompile(`\s*\n\s*`).ReplaceAllString(protocolText(t), " ")
	for _, tc := range []struct {
		pattern string // one group: the doc's number
		unit    int64  // what one of the doc's unit is in the code's
		code    int64
	}{
		{"A header is at most (\\d+) KiB long", 1 << 10, stageproto.MaxHeader},
		{"Data is at most (\\d+) MiB per message", 1 << 20, stageproto.MaxData},
		{"`max_jobs` \\(default (\\d+)\\)", 1, stageproto.DefaultMaxJobs},
		{"`window` \\(default (\\d+)\\): how many input chunks", 1, stageproto.DefaultWindow},
		{"A `job` message without `window` \\(or with 0\\) means the default, (\\d+)\\.", 1, stageproto.DefaultWindow},
		{"`warm_timeout` \\(default (\\d+) minutes\\)", int64(time.Minute), int64(external.DefaultWarmTimeout)},
		{"answered a `cancel` within (\\d+) seconds", int64(time.Second), int64(external.DefaultCancelTimeout)},
		{"has not exited within (\\d+) s is sent SIGTERM", int64(time.Second), int64(external.StopTimeout)},
		{"is answered within (\\d+) s; a refusal", int64(time.Second), int64(external.CheckTimeout)},
		{"`--timeout D` \\(default (\\d+) s\\)", int64(time.Second), int64(stagecheck.DefaultTimeout)},
		{"`timeout` \\(default (\\d+) s\\), while it has input", int64(time.Second), int64(external.DefaultTimeout)},
		{"stage's `timeout` \\(default (\\d+) s\\), as it cancels", int64(time.Second), int64(external.DefaultTimeout)},
		{"a token bucket of (\\d+) KiB per second", 1 << 10, subprocess.LogRate},
		{"KiB per second, holding (\\d+) KiB", 1 << 10, subprocess.LogBurst},
		{"stops waiting for the program's output (\\d+) s after", int64(time.Second), int64(subprocess.OutputDelay)},
		{"`max_batch` \\(default (\\d+)\\): when above 0", 1, 0},
		{"at most (\\d+) of them, making at most \\d+ elements", 1, engine.MaxTensorRank},
		{"at most \\d+ of them, making at most (\\d+) elements", 1, engine.MaxTensorElements},
		{"one entry per tensor, 1 to (\\d+) of them", 1, engine.MaxTensors},
		{"\\(1 to (\\d+) pixels a side\\); the runtime reads", 1, engine.MaxImageSide},
		{"A chunk holds at most (\\d+) regions", 1, engine.MaxRegions},
	} {
		m := regexp.MustCompile(tc.pattern).FindStringSubmatch(text)
		if m == nil {
			t.Errorf("%s does not say %q", protocolDoc, tc.pattern)
			continue
		}
		if n, _ := strconv.ParseInt(m[1], 10, 64); n*tc.unit != tc.code {
			t.Errorf("%s says %q; the code's value is %d (in units of %d)", protocolDoc, m[0], tc.code, tc.unit)
		}
	}
}

// TestDocCreditBatch checks what the doc says of the credit both sides
// of this repository give back.
func TestDocCreditBatch(t *testing.T) {
	text := regexp.MustCompile(`\s*\n\s*`).ReplaceAllString(protocolText(t), " ")
	if !strings.Contains(text, "Both sides of this repository give credit back once half a window has been taken.") {
		t.Fatalf("%s does not say when the runtime gives credit back", protocolDoc)
	}
	for _, w := range []int{2, 8, 16} {
		if got := stageproto.CreditBatch(w); got != w/2 {
			t.Errorf("CreditBatch(%d) = %d; the doc says half a window", w, got)
		}
	}
}

// TestDocCheckCases checks the table of stage check's cases against the
// battery, in order.
func TestDocCheckCases(t *testing.T) {
	var rows []string
	for _, row := range tableRows(section(t, protocolText(t), "## Checking a stage")) {
		rows = append(rows, row[0])
	}
	if want := stagecheck.CaseNames(); !slices.Equal(rows, want) {
		t.Errorf("%s lists the cases %v; the battery runs %v", protocolDoc, rows, want)
	}
}

// TestDocExampleSessionFrames checks the example session's framing: each
// header that announces data is followed by a line standing for exactly
// that many bytes.
func TestDocExampleSessionFrames(t *testing.T) {
	lines := section(t, protocolText(t), "## Example session")
	dataLine := regexp.MustCompile(`^[<>] \[(\d+) bytes\]$`)
	n := 0
	for i, l := range lines {
		if !strings.HasPrefix(l, "< {") && !strings.HasPrefix(l, "> {") {
			continue
		}
		n++
		var h stageproto.Header
		if err := json.NewDecoder(bytes.NewReader([]byte(l[2:]))).Decode(&h); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if h.DataLength == 0 {
			continue
		}
		m := dataLine.FindStringSubmatch(lines[min(i+1, len(lines)-1)])
		if m == nil || m[1] != strconv.Itoa(h.DataLength) || lines[i+1][0] != l[0] {
			t.Errorf("%q is not followed by the %d bytes it announces, from the same side", l, h.DataLength)
		}
	}
	if n == 0 {
		t.Fatalf("%s shows no example session", protocolDoc)
	}
}

// TestSDKLimits holds the Python SDK's copies of the protocol's limits
// and the kinds' bounds (checked there before a chunk is sent, and as one
// arrives) to the code's.
func TestSDKLimits(t *testing.T) {
	files, err := filepath.Glob("../../sdk/python/omnistage_stage/*.py")
	if err != nil || len(files) == 0 {
		t.Fatalf("the Python SDK's files: %v", err)
	}
	defs := map[string]int64{}
	def := regexp.MustCompile(`(?m)^([A-Z_]+) = (\d+)(?: << (\d+))?\b`)
	var dtypes string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range def.FindAllStringSubmatch(string(src), -1) {
			n, _ := strconv.ParseInt(m[2], 10, 64)
			if m[3] != "" {
				shift, _ := strconv.Atoi(m[3])
				n <<= shift
			}
			defs[m[1]] = n
		}
		if m := regexp.MustCompile(`(?m)^DTYPES = \{(.*)\}$`).FindStringSubmatch(string(src)); m != nil {
			dtypes = m[1]
		}
	}
	for name, want := range map[string]int64{
		"MAX_HEADER": stageproto.MaxHeader, "MAX_DATA": stageproto.MaxData,
		"DEFAULT_WINDOW": stageproto.DefaultWindow, "DEFAULT_MAX_JOBS": stageproto.DefaultMaxJobs,
		"MAX_META_ENTRIES": engine.MaxMetaEntries, "MAX_META_BYTES": engine.MaxMetaBytes,
		"MAX_TENSOR_RANK": engine.MaxTensorRank, "MAX_TENSOR_ELEMENTS": engine.MaxTensorElements,
		"MAX_TENSOR_BYTES": engine.MaxTensorBytes, "MAX_TENSORS": engine.MaxTensors,
		"MAX_IMAGE_SIDE": engine.MaxImageSide, "MAX_REGIONS": engine.MaxRegions,
	} {
		if got, ok := defs[name]; !ok || got != want {
			t.Errorf("the Python SDK's %s is %d (defined: %v); the code's is %d", name, got, ok, want)
		}
	}
	var want []string
	for _, d := range engine.DTypes {
		want = append(want, fmt.Sprintf("%q: %d", string(d), d.Size()))
	}
	if got := strings.Join(want, ", "); dtypes != got {
		t.Errorf("the Python SDK's DTYPES are {%s}; the code's {%s}", dtypes, got)
	}
}
