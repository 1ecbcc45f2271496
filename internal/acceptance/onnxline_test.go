package acceptance

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/color/palette"
	"image/jpeg"
	"image/png"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/omnistage/omnistage/internal/apijson"
	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/ocrtest"
	"github.com/omnistage/omnistage/internal/testdeps"
)

// The files examples/onnx-line runs on: scripts/install-deps.sh installs
// them.
const (
	recModel = "/usr/local/share/omnistage/models/ppocr-v4/ch_PP-OCRv4_rec_infer.onnx"
	recDict  = "/usr/local/share/omnistage/models/ppocr-v4/ppocr_keys_v1.txt"
	ortLib   = "/usr/local/lib/omnistage/libonnxruntime.so.1"
)

// onnxLineConfig returns examples/onnx-line/pipeline.yaml with the
// commands of its stages made absolute, so that a server runs it from any
// directory, and each occurrence of a key of edits replaced by its value.
func onnxLineConfig(tb testing.TB, edits map[string]string) string {
	tb.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		tb.Skip("the onnx-line example needs python3")
	}
	for _, f := range []string{recModel, recDict, ortLib} {
		if _, err := os.Stat(f); err != nil {
			tb.Skipf("the onnx-line example needs %s (scripts/install-deps.sh): %v", f, err)
		}
	}
	abs, err := filepath.Abs(repoDir)
	if err != nil {
		tb.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(abs, "examples/onnx-line/pipeline.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	cfg := strings.ReplaceAll(string(text), `"examples/onnx-line/`, `"`+abs+`/examples/onnx-line/`)
	for old, repl := range edits {
		if !strings.Contains(cfg, old) {
			tb.Fatalf("the example's pipeline has no %q", old)
		}
		cfg = strings.ReplaceAll(cfg, old, repl)
	}
	return writeFile(tb, "onnx-line.yaml", cfg)
}

// readLine posts an image to the line reader and returns the answer's
// status and text (or body, when it is not 200).
func readLine(tb testing.TB, url string, img []byte) (int, string) {
	tb.Helper()
	body, _ := json.Marshal(map[string]any{"input": map[string]any{"image": base64.StdEncoding.EncodeToString(img)}, "output_modalities": []string{"text"}})
	resp, err := http.Post(url+"/v1/generate", "application/json", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, string(data)
	}
	var gen apijson.GenerateResponse
	if err := json.Unmarshal(data, &gen); err != nil || len(gen.Outputs) != 1 || gen.Outputs[0].Modality != "text" {
		tb.Fatalf("answer %s (%v)", data, err)
	}
	return resp.StatusCode, gen.Outputs[0].Text
}

// renderLine draws a line of text black on white, as a PNG file.
func renderLine(tb testing.TB, text string) []byte {
	tb.Helper()
	fonts, err := ocrtest.Fonts()
	if err != nil {
		tb.Skip(err)
	}
	p := ocrtest.Page{Lines: []string{text}, Font: fonts[0], Size: 30, Ink: color.RGBA{A: 255}, Paper: color.RGBA{255, 255, 255, 255}, Margin: 6}
	m, err := p.Render(rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		tb.Fatal(err)
	}
	return encodePNG(tb, rgbImage(m))
}

func rgbImage(m imaging.RGB) *image.RGBA {
	out := image.NewRGBA(image.Rect(0, 0, m.Width, m.Height))
	for i := range m.Width * m.Height {
		copy(out.Pix[4*i:4*i+3], m.Pix[3*i:3*i+3])
		out.Pix[4*i+3] = 255
	}
	return out
}

func encodePNG(tb testing.TB, m image.Image) []byte {
	tb.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// TestOnnxLineExample serves examples/onnx-line, a real ONNX model (PP-
// OCRv4's recognizer, engine onnx) between two Python stages of the
// example's (an image to the model's input tensor; its output tensor to
// text, in batches): it reads the example's own image and a line rendered
// here, serves requests at once, and refuses what it cannot read with a
// 400 that says why.
func TestOnnxLineExample(t *testing.T) {
	s := serve(t, "--config", onnxLineConfig(t, map[string]string{"max_batch: 8 ": "max_batch: 8\n      max_batch_delay: 100ms "}))
	own, err := os.ReadFile(filepath.Join(repoDir, "examples/onnx-line/line.png"))
	if err != nil {
		t.Fatal(err)
	}
	if status, text := readLine(t, s.url, own); status != http.StatusOK || text != "Hello from omnistage, 2026." {
		t.Errorf("examples/onnx-line/line.png: %d %q", status, text)
	}
	const want = "Read by a model of your own: 42 lines"
	if status, text := readLine(t, s.url, renderLine(t, want)); status != http.StatusOK || ocrtest.CER(want, text) > 0.05 {
		t.Errorf("a rendered line: %d %q; want %q", status, text, want)
	}

	// Requests at once: each gets its own line, through the decoding
	// stage's batches.
	lines := []string{"The first of six lines", "A second line, 2", "Line number three", "Four score and seven", "Fifth: omnistage", "Six is the last"}
	var wg sync.WaitGroup
	for _, line := range lines {
		img := renderLine(t, line)
		wg.Go(func() {
			if status, text := readLine(t, s.url, img); status != http.StatusOK || ocrtest.CER(line, text) > 0.1 {
				t.Errorf("at once: %d %q; want %q", status, text, line)
			}
		})
	}
	wg.Wait()
	// Every request so far went through the batches of the decoding
	// stage, whose program takes them.
	if n := metric(t, s.url, "", `omnistage_batch_size_sum{pipeline="read-line",stage="2"}`); n != float64(2+len(lines)) {
		t.Errorf("the decoding stage's batches held %v items; want the %d requests", n, 2+len(lines))
	}

	// What the example cannot read: a 400 from its own stage.
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, image.NewGray(image.Rect(0, 0, 40, 20)), nil); err != nil {
		t.Fatal(err)
	}
	broken := bytes.Clone(own)
	copy(broken[len(broken)-40:], bytes.Repeat([]byte{0xee}, 28)) // inside the image data, before IEND
	for name, tc := range map[string]struct {
		img  []byte
		want string
	}{
		"jpeg":       {jpg.Bytes(), "stage 0 (prep): invalid input: this example reads PNG files; got jpeg"},
		"broken png": {broken, "stage 0 (prep): invalid input: the PNG file: "},
	} {
		if status, body := readLine(t, s.url, tc.img); status != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s; want 400 saying %q", name, status, body, tc.want)
		}
	}
}

// TestOnnxLinePNG checks the example's pure-Python PNG decoder against Go's
// on the colour types and depths it reads: the same RGB pixels, with
// transparency laid over white.
func TestOnnxLinePNG(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		testdeps.Missing(t, "no python3")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const w, h = 13, 7
	gray, gray16 := image.NewGray(image.Rect(0, 0, w, h)), image.NewGray16(image.Rect(0, 0, w, h))
	rgba, nrgba, rgba64 := image.NewRGBA(image.Rect(0, 0, w, h)), image.NewNRGBA(image.Rect(0, 0, w, h)), image.NewNRGBA64(image.Rect(0, 0, w, h))
	pal := image.NewPaletted(image.Rect(0, 0, w, h), append(color.Palette{color.NRGBA{10, 20, 30, 0}, color.NRGBA{200, 100, 50, 128}}, palette.Plan9[:60]...))
	grayA := make([]byte, 0, 2*w*h) // gray and alpha, which Go's encoder never writes: by hand
	for y := range h {
		for x := range w {
			v := uint8(rng.IntN(256))
			gray.SetGray(x, y, color.Gray{Y: v})
			gray16.SetGray16(x, y, color.Gray16{Y: uint16(rng.IntN(65536))})
			rgba.SetRGBA(x, y, color.RGBA{v, uint8(rng.IntN(256)), uint8(rng.IntN(256)), 255})
			nrgba.SetNRGBA(x, y, color.NRGBA{v, uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256))})
			rgba64.SetNRGBA64(x, y, color.NRGBA64{uint16(rng.IntN(65536)), uint16(rng.IntN(65536)), uint16(rng.IntN(65536)), uint16(rng.IntN(65536))})
			pal.SetColorIndex(x, y, uint8(rng.IntN(len(pal.Palette))))
			grayA = append(grayA, v, uint8(rng.IntN(256)))
		}
	}
	files := map[string][]byte{"graya": grayAlphaPNG(t, w, h, grayA)}
	for name, m := range map[string]image.Image{"gray": gray, "gray16": gray16, "rgb": rgba, "rgba": nrgba, "rgba64": rgba64, "palette": pal} {
		files[name] = encodePNG(t, m)
	}
	// One run of python3 decodes each NAME.png to NAME.rgb: "W H\n" and
	// the pixels.
	dir := t.TempDir()
	args := []string{"-c", `import sys; sys.path.insert(0, sys.argv[1]); import png
for f in sys.argv[2:]:
    w, h, px = png.decode(open(f + ".png", "rb").read())
    open(f + ".rgb", "wb").write(b"%d %d\n" % (w, h) + px)`, filepath.Join(repoDir, "examples/onnx-line")}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name+".png"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, filepath.Join(dir, name))
	}
	if out, err := exec.Command("python3", args...).CombinedOutput(); err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join(dir, name+".rgb"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := imaging.Decode(data, imaging.DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			head := fmt.Sprintf("%d %d\n", w, h)
			if !bytes.HasPrefix(out, []byte(head)) {
				t.Fatalf("decoded %q; want %q first", out[:min(len(out), 20)], head)
			}
			got := out[len(head):]
			if len(got) != len(want.Pix) {
				t.Fatalf("%d bytes of pixels; want %d", len(got), len(want.Pix))
			}
			for i := range got {
				if d := int(got[i]) - int(want.Pix[i]); d < -1 || d > 1 {
					t.Fatalf("byte %d (pixel %d, channel %d) is %d; Go's decoder gives %d", i, i/3, i%3, got[i], want.Pix[i])
				}
			}
		})
	}
}

// grayAlphaPNG writes a PNG of colour type 4 (8-bit gray and alpha) of
// pix, rows unfiltered.
func grayAlphaPNG(tb testing.TB, w, h int, pix []byte) []byte {
	tb.Helper()
	var raw bytes.Buffer
	zw := zlib.NewWriter(&raw)
	for y := range h {
		zw.Write([]byte{0})
		zw.Write(pix[2*w*y : 2*w*(y+1)])
	}
	zw.Close()
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(kind string, body []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(body)))
		c := append([]byte(kind), body...)
		b.Write(c)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(c))
	}
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(w)), uint32(h))
	chunk("IHDR", append(ihdr, 8, 4, 0, 0, 0))
	chunk("IDAT", raw.Bytes())
	chunk("IEND", nil)
	return b.Bytes()
}
