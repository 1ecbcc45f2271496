package cv

// Offsetting a polygon with Clipper.

/*
#include "ccv.h"
*/
import "C"

import (
	"fmt"
	"image"
	"math"
	"unsafe"
)

// Offset returns the closed polygon poly grown by delta pixels (shrunk
// when delta is negative), its corners rounded: Clipper's ClipperOffset
// with round joins, as pyclipper's PyclipperOffset with JT_ROUND and
// ET_CLOSEDPOLYGON gives it. The result may be several polygons, or none.
func Offset(poly []image.Point, delta float64) ([][]image.Point, error) {
	if len(poly) == 0 {
		return nil, fmt.Errorf("cv: offset: no points")
	}
	if math.IsNaN(delta) || math.Abs(delta) > MaxSide {
		return nil, fmt.Errorf("cv: offset: delta %v", delta)
	}
	xy := make([]C.int64_t, 2*len(poly))
	for i, p := range poly {
		xy[2*i], xy[2*i+1] = C.int64_t(p.X), C.int64_t(p.Y)
	}
	var out C.omni_clip_paths
	var eb errBuf
	if err := eb.err("offset", C.omni_clip_offset(&xy[0], C.int(len(poly)), C.double(delta), &out, eb.ptr(), errLen)); err != nil {
		return nil, err
	}
	defer C.omni_clip_paths_free(&out)
	lens := unsafe.Slice(out.lens, int(out.n))
	var paths [][]image.Point
	k := 0
	for _, n := range lens {
		pts := unsafe.Slice(out.xy, 2*(k+int(n)))[2*k:]
		path := make([]image.Point, n)
		for i := range path {
			path[i] = image.Pt(int(pts[2*i]), int(pts[2*i+1]))
		}
		paths = append(paths, path)
		k += int(n)
	}
	return paths, nil
}
