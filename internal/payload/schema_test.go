package payload

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
)

// docTable returns the table of s as docs/payload.md shows it:
// a title line, then one line per field.
func (s *schema[T]) docTable() string {
	var b strings.Builder
	b.WriteString(s.name + ": " + s.doc + "\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, f := range s.fields {
		tw.Write([]byte("  " + strings.Join([]string{f.key, f.name, f.typ, f.presence.String(), f.doc}, "\t") + "\n"))
	}
	tw.Flush()
	return b.String()
}

// docPath is the reference of the format, which shows the schema and the
// error codes.
const docPath = "../../docs/payload.md"

// schemaDoc returns the lines of docPath that show the schema: every table,
// one after the other, separated by blank lines.
func schemaDoc() []string {
	var lines []string
	for i, table := range []string{
		envelopeSchema.docTable(), promptSchema.docTable(), outputSchema.docTable(),
		chunkSchema.docTable(), spanSchema.docTable(), textSchema.docTable(), framesSchema.docTable(),
		segmentsSchema.docTable(), audioSchema.docTable(), wordsSchema.docTable(),
		wordSchema.docTable(), tensorsSchema.docTable(), tensorSchema.docTable(), imageSchema.docTable(),
		regionsSchema.docTable(), regionSchema.docTable(), cropSchema.docTable(), dataSchema.docTable(), errorSchema.docTable(),
	} {
		if i > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(table, "\n"), "\n")...)
	}
	return lines
}

// TestDocSchema checks that the tables of docs/payload.md are those of the
// schema: the paragraph that names this test is followed by them, in the
// next fenced code block. With -update it rewrites them.
func TestDocSchema(t *testing.T) {
	src, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "TestDocSchema fails") })
	if start < 0 {
		t.Fatalf("%s has no paragraph that names TestDocSchema", docPath)
	}
	fence := slices.IndexFunc(lines[start:], func(l string) bool { return strings.HasPrefix(l, "```") })
	if fence < 0 {
		t.Fatalf("%s has no code block after the paragraph that names TestDocSchema", docPath)
	}
	start += fence + 1 // inside the block
	end := slices.Index(lines[start:], "```")
	if end < 0 {
		t.Fatalf("%s: the code block of the schema tables does not end", docPath)
	}
	end += start
	want := schemaDoc()
	if slices.Equal(lines[start:end], want) {
		return
	}
	if *update {
		out := slices.Concat(lines[:start], want, lines[end:])
		if err := os.WriteFile(docPath, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the schema tables of %s differ from the schema (rerun with -update):\n got\n%s\nwant\n%s", docPath, strings.Join(lines[start:end], "\n"), strings.Join(want, "\n"))
}

// TestBulkFloat32s checks that float32s travel as little-endian bins,
// bit for bit (NaN's payload, infinities, -0 and denormals included),
// through a codec that copies them out and one that reads them in place
// (package lebytes checks its fast paths against the portable ones, which
// big-endian hosts use).
func TestBulkFloat32s(t *testing.T) {
	floats := framesChunk(7, 3, 0).Frames.Params
	floats = append(floats, float32(math.Inf(-1)), math.Float32frombits(0x7fc00001), math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)))
	for _, n := range []int{0, 1, len(floats)} {
		s := floats[:n]
		w := &writer{}
		float32sV.write(w, &s)
		var want []byte
		for _, v := range s {
			want = binary.LittleEndian.AppendUint32(want, math.Float32bits(v))
		}
		if !bytes.HasSuffix(w.b, want) || len(w.b) < len(want) {
			t.Fatalf("float32s of %d: encoded %x; want a bin of %x", n, w.b, want)
		}
		for _, own := range []bool{false, true} {
			r := &reader{b: bytes.Clone(w.b)}
			if own {
				r.own(r.b)
			}
			var got []float32
			if err := float32sV.read(r, &got); err != nil {
				t.Fatalf("float32s of %d (own %v): %v", n, own, err)
			}
			if len(got) != n {
				t.Fatalf("float32s of %d (own %v): %d back", n, own, len(got))
			}
			for i := range s {
				if math.Float32bits(got[i]) != math.Float32bits(s[i]) {
					t.Fatalf("float32s of %d (own %v): element %d does not round trip bit for bit", n, own, i)
				}
			}
		}
	}
}
