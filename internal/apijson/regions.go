package apijson

// Text regions of an image in JSON, and the text they read as.

import (
	"strings"

	"github.com/omnistage/omnistage/internal/engine"
)

// Region is one text region of an image: Box its corners [x, y] in the
// image's pixels, clockwise from the top-left of its text; Text what was
// read in it (empty before recognition) and Confidence the confidence in
// each code point of Text; CharStart and CharEnd where Text lies in the
// request's recognized text (the regions' texts in reading order, each
// followed by a newline), in code points, end exclusive: the offsets
// word timestamps use, so that a spoken word maps to its region.
type Region struct {
	Index      int           `json:"index"`
	Box        [4][2]float32 `json:"box"`
	Score      float32       `json:"score"`
	Rotated    bool          `json:"rotated,omitempty"`
	Text       string        `json:"text"`
	Confidence []float32     `json:"confidence,omitempty"`
	CharStart  int           `json:"char_start"`
	CharEnd    int           `json:"char_end"`
}

// RegionsRenderer renders an output of regions chunk by chunk: each
// chunk's regions, with their places in the text read so far.
type RegionsRenderer struct {
	text engine.RegionsText
}

// Chunk renders the regions of one chunk, and returns the text they add
// (each region's text followed by a newline).
func (rr *RegionsRenderer) Chunk(rs *engine.Regions) ([]Region, string) {
	before := len(rr.text.Spans())
	added := rr.text.Add(rs.Regions)
	spans := rr.text.Spans()[before:]
	out := make([]Region, 0, len(rs.Regions))
	for _, r := range rs.Regions {
		j := Region{Index: r.Index, Score: r.Score, Rotated: r.Rotated, Text: r.Text, Confidence: r.Confidence}
		for i, p := range r.Box {
			j.Box[i] = [2]float32{p.X, p.Y}
		}
		if len(spans) > 0 && spans[0].Index == r.Index && r.Text != "" {
			j.CharStart, j.CharEnd = spans[0].Start, spans[0].End
			spans = spans[1:]
		}
		out = append(out, j)
	}
	return out, added
}

// renderRegions renders a whole output of regions chunks: as the regions
// (kind regions) or as their text, lines joined by newlines (kind text).
func renderRegions(kind engine.Kind, chunks []engine.Chunk) Outputs {
	var rr RegionsRenderer
	out := Outputs{Regions: []Region{}}
	var text strings.Builder
	for _, c := range chunks {
		regions, added := rr.Chunk(c.Regions)
		out.Regions = append(out.Regions, regions...)
		text.WriteString(added)
	}
	if kind == engine.KindText {
		return Outputs{Text: strings.TrimSuffix(text.String(), "\n")}
	}
	return out
}
