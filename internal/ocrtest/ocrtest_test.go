package ocrtest

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/omnistage/omnistage/internal/imaging"
	"github.com/omnistage/omnistage/internal/testdeps"
)

func TestCER(t *testing.T) {
	tests := []struct {
		ref, hyp string
		want     float64
	}{
		{"abc", "abc", 0},
		{"abc", "abd", 1.0 / 3},
		{"kitten", "sitting", 3.0 / 6},
		{"Hello", "hello", 1.0 / 5},
		{"hello\nworld", "hello world", 0},
		{"hello  world\n\n", "  hello\tworld", 0},
		{"one two", "onetwo", 1.0 / 7},
		{"你好，世界。", "你 好 , 世 界 。", 0},
		{"价格：12元", "价格:１２元", 0},
		{"今天\n天气", "今天天气", 0},
		{"abc", "", 1},
		{"ab", "abcdef", 2},
		{"", "", 0},
		{"", "x", 1},
	}
	for _, tt := range tests {
		if got := CER(tt.ref, tt.hyp); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("CER(%q, %q) = %v; want %v", tt.ref, tt.hyp, got, tt.want)
		}
	}
}

func testSet(t *testing.T, opts SetOptions) []Sample {
	t.Helper()
	if _, err := Fonts(); err != nil {
		testdeps.Missing(t, "%v", err)
	}
	set, err := Set(opts)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestSetIsDeterministic(t *testing.T) {
	opts := SetOptions{Seed: 7, English: 4, Rotated: 1, Chinese: 2}
	a, b := testSet(t, opts), testSet(t, opts)
	opts.Seed = 8
	c := testSet(t, opts)
	if len(a) != 7 || len(b) != 7 || len(c) != 7 {
		t.Fatalf("%d, %d and %d samples; want 7 each", len(a), len(b), len(c))
	}
	differ := 0
	count := map[string]int{}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Text != b[i].Text || !bytes.Equal(a[i].PNG, b[i].PNG) {
			t.Errorf("sample %d differs between two runs with one seed: %s, %s", i, a[i].Name, b[i].Name)
		}
		if !bytes.Equal(a[i].PNG, c[i].PNG) {
			differ++
		}
		count[a[i].Subset]++
		if strings.TrimSpace(a[i].Text) == "" {
			t.Errorf("%s shows no text", a[i].Name)
		}
		dec, err := imaging.Decode(a[i].PNG, imaging.DefaultLimits)
		if err != nil || !bytes.Equal(dec.Pix, a[i].Image.Pix) {
			t.Errorf("%s: its PNG does not decode to its image (%v)", a[i].Name, err)
		}
	}
	if differ < 6 {
		t.Errorf("only %d of 7 samples differ between seeds 7 and 8", differ)
	}
	if count[English] != 4 || count[Rotated] != 1 || count[Chinese] != 2 {
		t.Errorf("subsets %v; want en 4, rotated 1, zh 2", count)
	}
}

// TestRenderedInk checks that text is drawn where the page says: dark ink
// between the margins of a white page, none in them.
func TestRenderedInk(t *testing.T) {
	fonts, err := Fonts()
	if err != nil {
		testdeps.Missing(t, "%v", err)
	}
	for _, f := range fonts {
		line := englishLines[0]
		if f.CJK {
			line = chineseLines[0]
		}
		p := Page{Lines: []string{line, line}, Font: f, Size: 24, Ink: inks[0], Paper: papers[0], Margin: 30}
		m, err := p.Render(rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		inside, outside := 0, 0
		for y := range m.Height {
			for x := range m.Width {
				if m.Pix[3*(y*m.Width+x)] > 128 {
					continue
				}
				if x >= 30 && x < m.Width-30 && y >= 30 && y < m.Height-30 {
					inside++
				} else {
					outside++
				}
			}
		}
		if inside < 500 || outside > 0 {
			t.Errorf("%s: %d dark pixels inside the margins, %d in them", f.Name, inside, outside)
		}
	}
}

func TestEffects(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m := imaging.NewRGB(40, 30)
	for i := range m.Pix {
		if (i/3)%40 < 20 {
			m.Pix[i] = 255
		}
	}
	blurred := Blur(m, 1.5)
	// An edge softens: a pixel beside it is neither black nor white.
	if v := blurred.Pix[3*(15*40+20)]; v < 40 || v > 215 {
		t.Errorf("beside the edge after a blur: %d", v)
	}
	if mean(blurred) < mean(m)-1 || mean(blurred) > mean(m)+1 {
		t.Errorf("a blur moved the mean from %.1f to %.1f", mean(m), mean(blurred))
	}
	noisy := Noise(m, 10, rng)
	changed := 0
	for i := range m.Pix {
		if noisy.Pix[i] != m.Pix[i] {
			changed++
		}
	}
	if changed < len(m.Pix)/4 {
		t.Errorf("noise changed %d of %d values", changed, len(m.Pix))
	}
	photo, err := Photograph(m, 4, rng)
	if err != nil {
		t.Fatal(err)
	}
	if photo.Width != 40 || photo.Height != 30 {
		t.Errorf("a photograph is %d×%d; want the page's 40×30", photo.Width, photo.Height)
	}
}

func mean(m imaging.RGB) float64 {
	s := 0
	for _, v := range m.Pix {
		s += int(v)
	}
	return float64(s) / float64(len(m.Pix))
}

// TestTesseract checks the peer on a clean English line and a Chinese
// one.
func TestTesseract(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	set := testSet(t, SetOptions{Seed: 1, English: 1, Chinese: 1})
	for _, s := range set {
		tess := Tesseract{Lang: "eng"}
		if s.Subset == Chinese {
			tess.Lang = "chi_sim"
		}
		if err := tess.Available(ctx); err != nil {
			testdeps.Missing(t, "%v", err)
		}
		res, err := tess.Read(ctx, s.PNG)
		if err != nil {
			t.Fatal(err)
		}
		if cer := CER(s.Text, res.Text); cer > 0.1 || res.Elapsed <= 0 || res.CPU <= 0 {
			t.Errorf("%s: read %q (CER %.2f) in %v (%v CPU); want %q", s.Name, res.Text, cer, res.Elapsed, res.CPU, s.Text)
		}
	}
	if _, err := (Tesseract{Lang: "eng"}).Read(ctx, []byte("not an image")); err == nil {
		t.Error("tesseract on bytes that are no image: no error")
	}
}
