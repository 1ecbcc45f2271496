package ocrtest

// The fonts the test images are drawn in.

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/font/sfnt"
)

// Font is one typeface of a font file.
type Font struct {
	// Name is the typeface's name: "Liberation Serif".
	Name string
	// CJK says it draws Chinese.
	CJK  bool
	font *opentype.Font
}

// Face returns the font at size pixels, unhinted (anti-aliased).
func (f *Font) Face(size float64) (font.Face, error) {
	return opentype.NewFace(f.font, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingNone})
}

// Has reports whether the font has a glyph for every character of s.
func (f *Font) Has(s string) bool {
	var buf sfnt.Buffer
	for _, r := range s {
		if r == ' ' || r == '\n' {
			continue
		}
		if i, err := f.font.GlyphIndex(&buf, r); err != nil || i == 0 {
			return false
		}
	}
	return true
}

// fontFile is where a typeface is: a file, and for a collection (.ttc) the
// face's name within it.
type fontFile struct {
	name, path string
	cjk        bool
}

// fontFiles are the typefaces used, from Debian's fonts-dejavu-core,
// fonts-liberation and fonts-noto-cjk.
var fontFiles = []fontFile{
	{name: "DejaVu Sans", path: "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"},
	{name: "DejaVu Serif", path: "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"},
	{name: "DejaVu Sans Mono", path: "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"},
	{name: "Liberation Sans", path: "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf"},
	{name: "Liberation Serif", path: "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf"},
	{name: "Liberation Sans Bold", path: "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf"},
	{name: "Noto Sans CJK SC", path: "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", cjk: true},
	{name: "Noto Serif CJK SC", path: "/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc", cjk: true},
}

var (
	fontsOnce sync.Once
	fonts     []*Font
	fontsErr  error
)

// Fonts returns the typefaces the test images use, loaded once, or an
// error naming the Debian packages to install.
func Fonts() ([]*Font, error) {
	fontsOnce.Do(func() { fonts, fontsErr = loadFonts() })
	return fonts, fontsErr
}

func loadFonts() ([]*Font, error) {
	var out []*Font
	for _, ff := range fontFiles {
		b, err := os.ReadFile(ff.path)
		if err != nil {
			return nil, fmt.Errorf("ocrtest: %w (install fonts-dejavu, fonts-liberation and fonts-noto-cjk: scripts/install-deps.sh)", err)
		}
		f, err := pickFace(b, ff.name)
		if err != nil {
			return nil, fmt.Errorf("ocrtest: %s: %w", ff.path, err)
		}
		out = append(out, &Font{Name: ff.name, CJK: ff.cjk, font: f})
	}
	return out, nil
}

// pickFace returns the face named name of the font file b: the file's
// only face, or the one of a collection whose family is name.
func pickFace(b []byte, name string) (*opentype.Font, error) {
	if !strings.HasPrefix(string(b[:4]), "ttcf") {
		return opentype.Parse(b)
	}
	c, err := opentype.ParseCollection(b)
	if err != nil {
		return nil, err
	}
	var buf sfnt.Buffer
	for i := range c.NumFonts() {
		f, err := c.Font(i)
		if err != nil {
			return nil, err
		}
		if family, err := f.Name(&buf, sfnt.NameIDFamily); err == nil && family == name {
			return f, nil
		}
	}
	return nil, fmt.Errorf("no face named %q", name)
}
