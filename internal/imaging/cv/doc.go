// Package cv binds the few functions of OpenCV's imgproc and of Clipper
// that OCR's pre- and post-processing need, through cgo (ccv.h): resizing
// and perspective crops of RGB images, contours of a binary mask, the
// rotated rectangle of least area around points, the mean of a map inside
// a polygon, and the offset of a polygon.
//
// Both libraries are the ones PaddleOCR's own Python code calls (cv2 is
// OpenCV; pyclipper wraps Clipper 6.4), so boxes, scores and offsets come
// out as PaddleOCR's do. They are Debian's: libopencv-imgproc-dev (OpenCV
// 4.6; imgproc and core only, not gocv, whose package would need all of
// OpenCV, 158 Debian packages and 123 MB with VTK, for these few calls)
// and libpolyclipping-dev.
//
// OpenCV is told to run sequentially (cv::setNumThreads(0)) when the
// package loads: the server runs requests in parallel, and OpenCV's thread
// pool would compete with them for the cores.
//
// Every function checks its arguments before C sees them and returns an
// error only for bad arguments or a failure inside a library (a C++
// exception, caught in C): the server's fault, never the caller's.
package cv

/*
#cgo CXXFLAGS: -std=c++17 -O2 -I/usr/include/opencv4 -I/usr/include/polyclipping
#cgo LDFLAGS: -lopencv_imgproc -lopencv_core -lpolyclipping -lstdc++
#include <stdlib.h>
#include "ccv.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// errLen is the room for a library's error message.
const errLen = 256

// errBuf holds the message a C call may leave.
type errBuf [errLen]C.char

func (b *errBuf) ptr() *C.char { return &b[0] }

// err returns the error of a C call that returned rc, prefixed with what.
func (b *errBuf) err(what string, rc C.int) error {
	if rc == C.OMNI_CV_OK {
		return nil
	}
	return errors.New("cv: " + what + ": " + C.GoString(b.ptr()))
}

// cbytes is a pointer to b's first byte, for C.
func cbytes(b []byte) *C.uint8_t { return (*C.uint8_t)(unsafe.Pointer(&b[0])) }
