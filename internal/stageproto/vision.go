package stageproto

// The tensor, image and regions kinds in input and output messages: their
// descriptions in the header, their bulk (elements, encoded image, crops'
// pixels) as the data.

import (
	"fmt"

	"github.com/omnistage/omnistage/internal/engine"
)

// encodeTensors returns the header fields and data of ts: the tensors'
// names, types and shapes, and their elements one tensor after another
// (a lone tensor's in its own memory).
func encodeTensors(ts *engine.Tensors) (ChunkHeader, []byte, error) {
	if err := ts.Check(); err != nil {
		return ChunkHeader{}, nil, invalid(engine.KindTensor, err)
	}
	h := ChunkHeader{Kind: string(engine.KindTensor), Tensors: make([]TensorField, len(ts.Tensors))}
	n := 0
	for i, t := range ts.Tensors {
		shape := t.Shape
		if shape == nil {
			shape = []int64{} // a scalar's: [], never null
		}
		h.Tensors[i] = TensorField{Name: t.Name, DType: string(t.Type), Shape: shape}
		n += len(t.Data)
	}
	if len(ts.Tensors) == 1 {
		return h, ts.Tensors[0].Data, nil
	}
	data := make([]byte, 0, n)
	for _, t := range ts.Tensors {
		data = append(data, t.Data...)
	}
	return h, data, nil
}

// decodeTensors returns the tensor chunk of h and data, each tensor's
// elements in data's memory.
func decodeTensors(h *ChunkHeader, data []byte, bad func(string, ...any) (engine.Chunk, error)) (engine.Chunk, error) {
	if len(h.Tensors) > engine.MaxTensors {
		return bad("%d tensors; the limit is %d", len(h.Tensors), engine.MaxTensors)
	}
	ts := &engine.Tensors{Tensors: make([]engine.Tensor, len(h.Tensors))}
	at := 0
	for i, f := range h.Tensors {
		size := engine.DType(f.DType).Size()
		if size == 0 {
			return bad("tensor %q: unknown dtype %q", f.Name, f.DType)
		}
		n, err := engine.Elements(f.Shape)
		if err != nil {
			return bad("tensor %q: %v", f.Name, err)
		}
		if n*int64(size) > int64(len(data)-at) {
			return bad("tensor %q: shape %v of %s makes %d bytes, but only %d of the data are left for it", f.Name, f.Shape, f.DType, n*int64(size), len(data)-at)
		}
		end := at + int(n)*size
		ts.Tensors[i] = engine.Tensor{Name: f.Name, Type: engine.DType(f.DType), Shape: f.Shape, Data: data[at:end:end]}
		at = end
	}
	if at != len(data) {
		return bad("the tensors' shapes make %d bytes, but the data has %d", at, len(data))
	}
	if err := ts.Check(); err != nil {
		return bad("%s", reason(err))
	}
	return engine.Chunk{Tensors: ts}, nil
}

// encodeImage returns the header fields and data of im.
func encodeImage(im *engine.Image) (ChunkHeader, []byte, error) {
	if err := im.Check(); err != nil {
		return ChunkHeader{}, nil, invalid(engine.KindImage, err)
	}
	return ChunkHeader{Kind: string(engine.KindImage), Format: im.Format, Width: im.Width, Height: im.Height}, im.Bytes, nil
}

func decodeImage(h *ChunkHeader, data []byte, bad func(string, ...any) (engine.Chunk, error)) (engine.Chunk, error) {
	im := &engine.Image{Format: h.Format, Width: h.Width, Height: h.Height, Bytes: data}
	if err := im.Check(); err != nil {
		return bad("%s", reason(err))
	}
	return engine.Chunk{Image: im}, nil
}

// encodeRegions returns the header fields and data of rs: the regions
// without their crops' pixels, which are the data, one crop after
// another in the regions' order.
func encodeRegions(rs *engine.Regions) (ChunkHeader, []byte, error) {
	if err := rs.Check(); err != nil {
		return ChunkHeader{}, nil, invalid(engine.KindRegions, err)
	}
	h := ChunkHeader{Kind: string(engine.KindRegions), Width: rs.Width, Height: rs.Height}
	if len(rs.Regions) > 0 {
		h.Regions = make([]RegionField, len(rs.Regions))
	}
	corners := make([]float32, 8*len(rs.Regions))
	n := 0
	for i := range rs.Regions {
		r := &rs.Regions[i]
		box := corners[8*i : 8*i+8 : 8*i+8]
		for k, p := range r.Box {
			box[2*k], box[2*k+1] = p.X, p.Y
		}
		f := RegionField{Index: r.Index, Box: [][]float32{box[0:2:2], box[2:4:4], box[4:6:6], box[6:8:8]},
			Score: r.Score, Rotated: r.Rotated, Text: r.Text, Confidence: r.Confidence}
		if c := r.Crop; c != nil {
			f.Crop = &CropField{Width: c.Width, Height: c.Height}
			n += len(c.Pixels)
		}
		h.Regions[i] = f
	}
	var data []byte
	if n > 0 {
		data = make([]byte, 0, n)
		for i := range rs.Regions {
			if c := rs.Regions[i].Crop; c != nil {
				data = append(data, c.Pixels...)
			}
		}
	}
	return h, data, nil
}

// decodeRegions returns the regions chunk of h and data, each crop's
// pixels in data's memory.
func decodeRegions(h *ChunkHeader, data []byte, bad func(string, ...any) (engine.Chunk, error)) (engine.Chunk, error) {
	if len(h.Regions) > engine.MaxRegions {
		return bad("%d regions; the limit is %d", len(h.Regions), engine.MaxRegions)
	}
	rs := &engine.Regions{Width: h.Width, Height: h.Height}
	if len(h.Regions) > 0 {
		rs.Regions = make([]engine.Region, len(h.Regions))
	}
	at := 0
	for i, f := range h.Regions {
		r := engine.Region{Index: f.Index, Score: f.Score, Rotated: f.Rotated, Text: f.Text, Confidence: f.Confidence}
		if len(f.Box) != 4 {
			return bad("regions[%d]: a box of %d corners; want 4 [x, y] pairs", i, len(f.Box))
		}
		for k, p := range f.Box {
			if len(p) != 2 {
				return bad("regions[%d]: box corner %d has %d numbers; want [x, y]", i, k, len(p))
			}
			r.Box[k] = engine.Point{X: p[0], Y: p[1]}
		}
		if c := f.Crop; c != nil {
			if c.Width < 1 || c.Height < 1 || c.Width > engine.MaxImageSide || c.Height > engine.MaxImageSide {
				return bad("regions[%d]: a crop of %d×%d pixels; each side is 1 to %d", i, c.Width, c.Height, engine.MaxImageSide)
			}
			n := 3 * c.Width * c.Height
			if n > len(data)-at {
				return bad("regions[%d]: a crop of %d×%d RGB pixels needs %d bytes, but only %d of the data are left for it", i, c.Width, c.Height, n, len(data)-at)
			}
			r.Crop = &engine.Crop{Width: c.Width, Height: c.Height, Pixels: data[at : at+n : at+n]}
			at += n
		}
		rs.Regions[i] = r
	}
	if at != len(data) {
		return bad("the crops make %d bytes, but the data has %d", at, len(data))
	}
	if err := rs.Check(); err != nil {
		return bad("%s", reason(err))
	}
	return engine.Chunk{Regions: rs}, nil
}

// invalid is the error of a chunk the runtime cannot send because it is
// not valid: one it made itself, so the server's failure, not the input's
// (the error is not an *engine.InputError).
func invalid(kind engine.Kind, err error) error {
	return fmt.Errorf("stage protocol: cannot send an invalid %s chunk: %s", kind, reason(err))
}

// reason is an *engine.InputError's reason, or err's text.
func reason(err error) string {
	if ie, ok := err.(*engine.InputError); ok {
		return ie.Reason
	}
	return err.Error()
}

// A regions chunk's header must leave room in a message's header for the
// message's other fields (a job's prompt and params, in a batch); past
// regionsHeaderRoom, or past MaxData of crops, SplitChunk cuts it.
const regionsHeaderRoom = MaxHeader / 2

// regionHeaderBound bounds the bytes of a region's entry in a header
// without its text and confidences: its keys and punctuation, and numbers
// as long as JSON writes a float32 or an int.
const regionHeaderBound = 320

// regionSize returns at least the bytes r takes in a header (its text as
// if each byte were escaped, its confidences at their longest) and its
// crop's bytes.
func regionSize(r *engine.Region) (header, data int) {
	header = regionHeaderBound + 6*len(r.Text) + 16*len(r.Confidence)
	if r.Crop != nil {
		data = len(r.Crop.Pixels)
	}
	return header, data
}

// SplitChunk returns c as the chunks to send it in: c itself, or, for a
// regions chunk whose description or crops do not fit one message, its
// regions in order in several chunks of the same image, as a stage may
// send an image's regions (a region too large alone is a chunk alone,
// which EncodeChunk then refuses).
func SplitChunk(c engine.Chunk) []engine.Chunk {
	rs := c.Regions
	if rs == nil {
		return []engine.Chunk{c}
	}
	var out []engine.Chunk
	start, header, data := 0, 0, 0
	for i := range rs.Regions {
		h, d := regionSize(&rs.Regions[i])
		if i > start && (header+h > regionsHeaderRoom || data+d > MaxData) {
			out = append(out, engine.Chunk{Regions: &engine.Regions{Width: rs.Width, Height: rs.Height, Regions: rs.Regions[start:i:i]}})
			start, header, data = i, 0, 0
		}
		header, data = header+h, data+d
	}
	if start == 0 {
		return []engine.Chunk{c}
	}
	return append(out, engine.Chunk{Regions: &engine.Regions{Width: rs.Width, Height: rs.Height, Regions: rs.Regions[start:]}})
}
