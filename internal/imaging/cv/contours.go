package cv

// Contours of a mask, the rectangle of least area around points, and the
// mean of a map inside a polygon.

/*
#include "ccv.h"
*/
import "C"

import (
	"fmt"
	"image"
	"unsafe"

	"github.com/omnistage/omnistage/internal/engine"
)

// FindContours returns the borders of the non-zero regions of the w×h
// mask, outer and inner alike, each with only the end points of its
// straight runs (OpenCV's RETR_LIST and CHAIN_APPROX_SIMPLE).
func FindContours(mask []byte, w, h int) ([][]image.Point, error) {
	if err := checkSize("contours", w, h); err != nil {
		return nil, err
	}
	if len(mask) != w*h {
		return nil, fmt.Errorf("cv: contours: a %d×%d mask of %d bytes", w, h, len(mask))
	}
	var out C.omni_cv_contours
	var eb errBuf
	if err := eb.err("contours", C.omni_cv_find_contours(cbytes(mask), C.int(w), C.int(h), &out, eb.ptr(), errLen)); err != nil {
		return nil, err
	}
	defer C.omni_cv_contours_free(&out)
	lens := unsafe.Slice(out.lens, int(out.n))
	total := 0
	for _, n := range lens {
		total += int(n)
	}
	xy := unsafe.Slice(out.xy, 2*total)
	pts := make([]image.Point, total)
	for i := range pts {
		pts[i] = image.Pt(int(xy[2*i]), int(xy[2*i+1]))
	}
	contours := make([][]image.Point, len(lens))
	for i, n := range lens {
		contours[i], pts = pts[:n:n], pts[n:]
	}
	return contours, nil
}

// RotatedRect is a rectangle at any angle.
type RotatedRect struct {
	// Corners are its corners in the order OpenCV's boxPoints gives them.
	Corners [4]engine.Point
	// Width and Height are its sides as OpenCV's RotatedRect has them.
	Width, Height float32
}

// MinAreaRect returns the rectangle of least area that holds pts
// (OpenCV's minAreaRect).
func MinAreaRect(pts []image.Point) (RotatedRect, error) {
	if len(pts) == 0 {
		return RotatedRect{}, fmt.Errorf("cv: min area rect: no points")
	}
	xy := make([]C.int32_t, 2*len(pts))
	for i, p := range pts {
		xy[2*i], xy[2*i+1] = C.int32_t(p.X), C.int32_t(p.Y)
	}
	var box [8]C.float
	var size [2]C.float
	var eb errBuf
	if err := eb.err("min area rect", C.omni_cv_min_area_rect(&xy[0], C.int(len(pts)), &box[0], &size[0], eb.ptr(), errLen)); err != nil {
		return RotatedRect{}, err
	}
	var r RotatedRect
	for i := range r.Corners {
		r.Corners[i] = engine.Point{X: float32(box[2*i]), Y: float32(box[2*i+1])}
	}
	r.Width, r.Height = float32(size[0]), float32(size[1])
	return r, nil
}

// PolygonMean returns the mean of the w×h map m over the pixels of rect
// (a rectangle inside the map) that poly covers, its points relative to
// rect's corner (OpenCV's fillPoly and mean); 0 when it covers none.
func PolygonMean(m []float32, w, h int, rect image.Rectangle, poly []image.Point) (float64, error) {
	if err := checkSize("polygon mean", w, h); err != nil {
		return 0, err
	}
	if len(m) != w*h {
		return 0, fmt.Errorf("cv: polygon mean: a %d×%d map of %d values", w, h, len(m))
	}
	if rect.Empty() || !rect.In(image.Rect(0, 0, w, h)) {
		return 0, fmt.Errorf("cv: polygon mean: %v is not inside the %d×%d map", rect, w, h)
	}
	if len(poly) == 0 {
		return 0, fmt.Errorf("cv: polygon mean: no points")
	}
	xy := make([]C.int32_t, 2*len(poly))
	for i, p := range poly {
		xy[2*i], xy[2*i+1] = C.int32_t(p.X), C.int32_t(p.Y)
	}
	var mean C.double
	var eb errBuf
	rc := C.omni_cv_poly_mean((*C.float)(unsafe.Pointer(&m[0])), C.int(w), C.int(h),
		C.int(rect.Min.X), C.int(rect.Min.Y), C.int(rect.Max.X-1), C.int(rect.Max.Y-1),
		&xy[0], C.int(len(poly)), &mean, eb.ptr(), errLen)
	return float64(mean), eb.err("polygon mean", rc)
}
