package sphinx

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine/flite"
	"github.com/omnistage/omnistage/internal/testkit/cdriver"
)

// TestCDriver runs the C layer alone (testdata/cdriver/driver.c) from two
// threads sharing two decoders: transcripts decoded whole, fed block by
// block, and stopped after the head's blocks, every result the lone run's;
// with -args -valgrind=helgrind (or drd, or memcheck), under that tool,
// which must report no error.
func TestCDriver(t *testing.T) {
	dir := t.TempDir()
	var list []string
	for i, c := range []struct{ text, voice string }{
		{sentences[0], "slt"},
		{"After a long discussion, they agreed to fund three new projects.", "kal16"},
		{"Please call Stella.", "awb"},
	} {
		a, _, err := flite.SynthesizeTimed(c.text, c.voice, 1)
		if err != nil {
			t.Fatal(err)
		}
		words, err := transcript(c.text, c.voice)
		if err != nil {
			t.Fatal(err)
		}
		pcm := make([]byte, 2*len(a.Samples))
		for j, s := range a.Samples {
			binary.LittleEndian.PutUint16(pcm[2*j:], uint16(s))
		}
		f := filepath.Join(dir, fmt.Sprintf("%d.raw", i))
		if err := os.WriteFile(f, pcm, 0o644); err != nil {
			t.Fatal(err)
		}
		line := f
		for _, w := range words {
			line += " " + w.key
		}
		list = append(list, line)
	}
	listFile := filepath.Join(dir, "list")
	if err := os.WriteFile(listFile, []byte(strings.Join(list, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := cdriver.Build(t, []string{"testdata/cdriver/driver.c", "csphinx.c"}, []string{"."}, cdriver.Flags(t, "cgo.go"))
	rounds := "4"
	if *cdriver.Valgrind != "" {
		rounds = "1"
	}
	t.Log(cdriver.Run(t, exe, DefaultModel, DefaultDict, listFile, "2", rounds))
}
