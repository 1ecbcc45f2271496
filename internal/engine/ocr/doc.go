// Package ocr is the engines of text in images, on PaddleOCR's PP-OCR
// models run by ONNX Runtime (package onnx) with their pre- and
// post-processing (package ppocr):
//
//   - ppocr-det (image → regions): decodes the image, finds its text
//     boxes and cuts each one out upright, in reading order, as one chunk
//     of all the image's regions (an image without text gives a chunk of
//     none);
//   - ppocr-cls (regions → regions): turns the crops of upside-down lines
//     180° (its input must hold an image's regions in one chunk: the page
//     votes and is put in reading order as a whole);
//   - ppocr-rec (regions → regions): reads each crop's text, dropping the
//     lines it is unsure of, and sends the lines as it reads them, in
//     reading order: the first on its own, then the rest in growing
//     groups, so that what follows (a talker) starts early. Unlike
//     PaddleOCR it reads, by default, the spaces between words that the
//     model scored but did not write (its option space_score).
//
// Each replica opens its model in Warm (a missing library or model file
// is an error that names it and scripts/install-deps.sh). cls and rec
// batch (engine.Batcher): a crop is one unit of work, and the units of
// concurrent requests run together, crops of one input width at a time,
// so that a crop reads the same in a batch as alone. The recognizer runs
// a batch's crops of one width two at a time, or alone when wide: on a
// CPU its time per crop grows in larger runs. A bad image is the
// request's fault (an *engine.InputError); a failure inside ONNX Runtime
// is the server's.
package ocr
