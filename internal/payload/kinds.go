package payload

// The schemas of the tensor, image and regions kinds.

import (
	"github.com/omnistage/omnistage/internal/engine"
	"github.com/omnistage/omnistage/internal/lebytes"
)

var (
	int64V = value[int64]{
		typ:   "int",
		write: func(w *writer, n *int64) { w.int(int(*n)) },
		read: func(r *reader, n *int64) error {
			v, err := r.int()
			*n = int64(v)
			return err
		},
	}

	// boxV is a quadrilateral: a bin of 8 little-endian float32s, the x and
	// y of its four corners.
	boxV = value[[4]engine.Point]{
		typ: "bin of 8 float32",
		write: func(w *writer, q *[4]engine.Point) {
			f := make([]float32, 0, 8)
			for _, p := range q {
				f = append(f, p.X, p.Y)
			}
			w.binLen(4 * len(f))
			w.b = lebytes.AppendFloat32s(w.b, f)
		},
		read: func(r *reader, q *[4]engine.Point) error {
			b, err := r.binView()
			if err != nil {
				return err
			}
			if len(b) != 32 {
				return wireErrorf("a box is 8 float32s (32 bytes), not %d bytes", len(b))
			}
			f := float32sOf(r, b)
			for i := range q {
				q[i] = engine.Point{X: f[2*i], Y: f[2*i+1]}
			}
			return nil
		},
	}

	// float32sOrNoneV is float32sV, empty when it holds none.
	float32sOrNoneV = func() value[[]float32] {
		v := float32sV
		v.empty = func(s *[]float32) bool { return len(*s) == 0 }
		return v
	}()

	tensorsSchema = newSchema("tensors", "engine.Tensors",
		fieldOf("tensors", "tensors", required, arrayOf(mapOf(tensorSchema)), func(t *engine.Tensors) *[]engine.Tensor { return &t.Tensors }, "the tensors, each named once"),
	)

	tensorSchema = newSchema("tensor", "engine.Tensor",
		fieldOf("name", "name", nonEmpty, strV, func(t *engine.Tensor) *string { return &t.Name }, "its name"),
		fieldOf("type", "type", nonEmpty, strOf[engine.DType](), func(t *engine.Tensor) *engine.DType { return &t.Type }, "element type: float32, float64, float16, int8, uint8, int16, int32, int64 or bool"),
		fieldOf("shape", "shape", required, arrayOf(int64V), func(t *engine.Tensor) *[]int64 { return &t.Shape }, "dimensions, outermost first"),
		fieldOf("data", "data", required, bytesV, func(t *engine.Tensor) *[]byte { return &t.Data }, "the elements, row-major, each little-endian"),
	)

	imageSchema = newSchema("image", "engine.Image",
		fieldOf("format", "format", nonEmpty, strV, func(i *engine.Image) *string { return &i.Format }, "png, jpeg or webp"),
		fieldOf("w", "width", required, intV, func(i *engine.Image) *int { return &i.Width }, "width, pixels"),
		fieldOf("h", "height", required, intV, func(i *engine.Image) *int { return &i.Height }, "height, pixels"),
		fieldOf("bytes", "bytes", required, bytesV, func(i *engine.Image) *[]byte { return &i.Bytes }, "the encoded image"),
	)

	regionsSchema = newSchema("regions", "engine.Regions",
		fieldOf("w", "width", required, intV, func(r *engine.Regions) *int { return &r.Width }, "the image's width, pixels"),
		fieldOf("h", "height", required, intV, func(r *engine.Regions) *int { return &r.Height }, "the image's height, pixels"),
		fieldOf("regions", "regions", required, arrayOf(mapOf(regionSchema)), func(r *engine.Regions) *[]engine.Region { return &r.Regions }, "text regions, in reading order"),
	)

	regionSchema = newSchema("region", "engine.Region",
		fieldOf("i", "index", required, intV, func(r *engine.Region) *int { return &r.Index }, "its place in reading order, from 0"),
		fieldOf("box", "box", required, boxV, func(r *engine.Region) *[4]engine.Point { return &r.Box }, "corners clockwise from the text's top-left, image pixels"),
		fieldOf("score", "score", required, float32V, func(r *engine.Region) *float32 { return &r.Score }, "detection confidence, 0..1"),
		fieldOf("crop", "crop", optional, ptrTo(cropSchema), func(r *engine.Region) **engine.Crop { return &r.Crop }, "what a recognizer reads"),
		fieldOf("rot", "rotated", optional, falseEmpty(boolV), func(r *engine.Region) *bool { return &r.Rotated }, "the crop was turned 180°"),
		fieldOf("text", "text", optional, strV, func(r *engine.Region) *string { return &r.Text }, "the recognized text"),
		fieldOf("conf", "confidence", optional, float32sOrNoneV, func(r *engine.Region) *[]float32 { return &r.Confidence }, "confidence of each code point of text"),
	)

	cropSchema = newSchema("crop", "engine.Crop",
		fieldOf("w", "width", required, intV, func(c *engine.Crop) *int { return &c.Width }, "width, pixels"),
		fieldOf("h", "height", required, intV, func(c *engine.Crop) *int { return &c.Height }, "height, pixels"),
		fieldOf("px", "pixels", required, bytesV, func(c *engine.Crop) *[]byte { return &c.Pixels }, "RGB, 8 bits a channel, row-major"),
	)
)
