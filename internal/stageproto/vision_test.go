package stageproto

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/omnistage/omnistage/internal/engine"
)

func tensorsChunk() engine.Chunk {
	x := engine.Float32Tensor("x", []int64{1, 3, 2, 2}, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	ids := engine.Tensor{Name: "ids", Type: engine.Int64, Shape: []int64{2}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}}
	scalar := engine.Tensor{Name: "flag", Type: engine.Bool, Shape: []int64{}, Data: []byte{1}}
	return engine.Chunk{Tensors: &engine.Tensors{Tensors: []engine.Tensor{x, ids, scalar}}}
}

func regionsChunk() engine.Chunk {
	box := [4]engine.Point{{X: 1, Y: 2}, {X: 30, Y: 2.5}, {X: 30, Y: 12}, {X: 1, Y: 11.5}}
	return engine.Chunk{Regions: &engine.Regions{Width: 40, Height: 20, Regions: []engine.Region{
		{Index: 0, Box: box, Score: 0.9, Crop: &engine.Crop{Width: 2, Height: 1, Pixels: []byte{1, 2, 3, 4, 5, 6}}},
		{Index: 1, Box: box, Score: 0.7, Rotated: true, Text: "Hé", Confidence: []float32{0.99, 0.5}},
		{Index: 2, Box: box, Score: 1, Crop: &engine.Crop{Width: 1, Height: 2, Pixels: []byte{7, 8, 9, 10, 11, 12}}},
	}}}
}

// TestVisionChunks encodes tensor, image and regions chunks, checks what
// travels where (descriptions in the header, bulk in the data), and
// decodes them back.
func TestVisionChunks(t *testing.T) {
	for _, tc := range []struct {
		c      engine.Chunk
		header string
		data   int
	}{
		{tensorsChunk(), `{"kind":"tensor","tensors":[{"name":"x","dtype":"float32","shape":[1,3,2,2]},{"name":"ids","dtype":"int64","shape":[2]},{"name":"flag","dtype":"bool","shape":[]}]}`, 48 + 16 + 1},
		{engine.Chunk{Image: &engine.Image{Format: "png", Width: 2, Height: 1, Bytes: []byte("\x89PNG not really")}}, `{"kind":"image","format":"png","width":2,"height":1}`, 15},
		{regionsChunk(), `{"kind":"regions","width":40,"height":20,"regions":[{"index":0,"box":[[1,2],[30,2.5],[30,12],[1,11.5]],"score":0.9,"crop":{"width":2,"height":1}},` +
			`{"index":1,"box":[[1,2],[30,2.5],[30,12],[1,11.5]],"score":0.7,"rotated":true,"text":"Hé","confidence":[0.99,0.5]},` +
			`{"index":2,"box":[[1,2],[30,2.5],[30,12],[1,11.5]],"score":1,"crop":{"width":1,"height":2}}]}`, 12},
		{engine.Chunk{Regions: &engine.Regions{Width: 40, Height: 20}}, `{"kind":"regions","width":40,"height":20}`, 0},
	} {
		t.Run(string(tc.c.Kind()), func(t *testing.T) {
			h, data, err := EncodeChunk(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := json.Marshal(h); string(b) != tc.header || len(data) != tc.data {
				t.Errorf("header %s and %d bytes of data; want %s and %d", b, len(data), tc.header, tc.data)
			}
			// The header as the other side reads it.
			var back ChunkHeader
			if err := json.Unmarshal([]byte(tc.header), &back); err != nil {
				t.Fatal(err)
			}
			got, err := DecodeChunk(&back, bytes.Clone(data))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.c) {
				t.Errorf("decoded %+v; want %+v", got, tc.c)
			}
		})
	}
}

// TestVisionChunksRefused decodes chunks that do not fit their kind: each
// is an input error that says what is wrong, as a program's output that
// loses its replica.
func TestVisionChunksRefused(t *testing.T) {
	tensor := `{"kind":"tensor","tensors":[{"name":"x","dtype":"float32","shape":[2,2]}]}`
	regions := `{"kind":"regions","width":40,"height":20,"regions":[{"index":0,"box":[[1,2],[3,2],[3,4],[1,4]],"score":0.9,"crop":{"width":2,"height":1}}]}`
	for _, tc := range []struct {
		name, header string
		data         int
		want         string
	}{
		{"tensor data short", tensor, 15, `tensor "x": shape [2 2] of float32 makes 16 bytes, but only 15 of the data are left for it`},
		{"tensor data long", tensor, 17, "the tensors' shapes make 16 bytes, but the data has 17"},
		{"unknown dtype", strings.Replace(tensor, "float32", "complex64", 1), 16, `tensor "x": unknown dtype "complex64"`},
		{"negative dimension", strings.Replace(tensor, "[2,2]", "[2,-2]", 1), 16, "dimension 1 is -2"},
		{"huge shape", strings.Replace(tensor, "[2,2]", "[1048576,1048576]", 1), 16, "has more than 67108864 elements"},
		{"no tensors", `{"kind":"tensor"}`, 0, "no tensors"},
		{"two named alike", `{"kind":"tensor","tensors":[{"name":"x","dtype":"uint8","shape":[1]},{"name":"x","dtype":"uint8","shape":[1]}]}`, 2, `two tensors named "x"`},
		{"image format", `{"kind":"image","format":"gif","width":1,"height":1}`, 4, `image format "gif"`},
		{"image size", `{"kind":"image","format":"png","width":0,"height":1}`, 4, "image of 0×1 pixels"},
		{"image empty", `{"kind":"image","format":"png","width":1,"height":1}`, 0, "image has no bytes"},
		{"crop pixels short", regions, 5, "regions[0]: a crop of 2×1 RGB pixels needs 6 bytes, but only 5 of the data are left for it"},
		{"crop pixels long", regions, 7, "the crops make 6 bytes, but the data has 7"},
		{"crop size", strings.Replace(regions, `"width":2`, `"width":0`, 1), 6, "regions[0]: a crop of 0×1 pixels"},
		{"box of 3", strings.Replace(regions, `[[1,2],`, `[`, 1), 6, "regions[0]: a box of 3 corners"},
		{"corner of 3", strings.Replace(regions, `[1,2]`, `[1,2,3]`, 1), 6, "regions[0]: box corner 0 has 3 numbers"},
		{"score", strings.Replace(regions, `0.9`, `1.5`, 1), 6, "regions[0]: score 1.5; want 0 to 1"},
		{"confidences", strings.Replace(regions, `"score"`, `"text":"Hi","confidence":[1],"score"`, 1), 6, "regions[0]: 1 confidences for a text of 2 code points"},
		{"image side", strings.Replace(regions, `"width":40`, `"width":99999`, 1), 6, "regions of an image of 99999×20 pixels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h ChunkHeader
			if err := json.Unmarshal([]byte(tc.header), &h); err != nil {
				t.Fatal(err)
			}
			_, err := DecodeChunk(&h, make([]byte, tc.data))
			var ie *engine.InputError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v; want an input error with %q", err, tc.want)
			}
		})
	}
}

// TestEncodeRefuses checks what the runtime will not send: an invalid
// chunk of its own (the server's failure, not an input error), and data
// past the framing's limit (the request's, an input error).
func TestEncodeRefuses(t *testing.T) {
	bad := regionsChunk()
	bad.Regions.Regions[1].Confidence[0] = float32(math.NaN())
	_, _, err := EncodeChunk(bad)
	var ie *engine.InputError
	if err == nil || errors.As(err, &ie) || !strings.Contains(err.Error(), "cannot send an invalid regions chunk: regions[1]: a confidence is not a finite number") {
		t.Errorf("NaN confidence: %v", err)
	}
	big := engine.Chunk{Data: &engine.Data{Kind: "blob", Bytes: make([]byte, MaxData+1)}}
	if _, _, err := EncodeChunk(big); !errors.As(err, &ie) || !strings.Contains(err.Error(), "a blob chunk of 16777217 bytes; a stage program takes at most 16 MiB") {
		t.Errorf("too large: %v", err)
	}
}

// TestSplitChunk cuts regions chunks that do not fit a message into
// several, in order, and leaves others whole.
func TestSplitChunk(t *testing.T) {
	many := func(n int, crop *engine.Crop, text string) engine.Chunk {
		rs := &engine.Regions{Width: 100, Height: 100, Regions: make([]engine.Region, n)}
		for i := range rs.Regions {
			rs.Regions[i] = engine.Region{Index: i, Score: 0.5, Crop: crop, Text: text}
		}
		return engine.Chunk{Regions: rs}
	}
	big := &engine.Crop{Width: 1000, Height: 1000, Pixels: make([]byte, 3_000_000)}
	per := regionsHeaderRoom / (regionHeaderBound + 6*40) // lines of 40 bytes of text in one piece
	for _, tc := range []struct {
		name string
		c    engine.Chunk
		want []int // regions per chunk
	}{
		{"audio", engine.Chunk{Audio: &engine.Audio{SampleRate: 16000}}, nil},
		{"few regions", many(10, nil, "hello"), []int{10}},
		{"many lines", many(400, nil, strings.Repeat("x", 40)), []int{per, per, per, per, per, per, 400 - 6*per}},
		{"large crops", many(12, big, ""), []int{5, 5, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := SplitChunk(tc.c)
			var got []int
			var joined []engine.Region
			for _, c := range out {
				if c.Regions == nil {
					continue
				}
				got = append(got, len(c.Regions.Regions))
				joined = append(joined, c.Regions.Regions...)
				h, data, err := EncodeChunk(c)
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := json.Marshal(Chunk{Type: TypeInput, Job: 1 << 40, ChunkHeader: h}); len(b) > regionsHeaderRoom+100 || len(data) > MaxData {
					t.Errorf("a piece of %d regions has a %d-byte header and %d bytes of data", len(c.Regions.Regions), len(b), len(data))
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("pieces of %v regions; want %v", got, tc.want)
			}
			if tc.c.Regions != nil && !reflect.DeepEqual(joined, tc.c.Regions.Regions) {
				t.Errorf("the pieces do not hold the regions in order")
			}
			if tc.c.Regions == nil && (len(out) != 1 || out[0].Audio != tc.c.Audio) {
				t.Errorf("%+v: not the chunk itself", out)
			}
		})
	}
}
