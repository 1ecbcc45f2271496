// Package ppocr holds the pre- and post-processing of PaddleOCR's PP-OCR
// models (PP-OCRv4 det and rec, the mobile v2.0 direction classifier), as
// functions over images, the models' float32 tensors and engine.Regions;
// running the models is another package's job.
//
//   - det: an image is scaled so that its longer side is at most 960
//     pixels and each side a multiple of 32 (DetOptions), and normalized
//     with ImageNet's mean and deviation; the model's probability map goes
//     through DB post-processing (DBOptions: threshold, contours, boxes of
//     least area, scored, grown by Clipper's offset) to boxes in the
//     image, put in reading order and cut out, upright, as the crops of
//     engine.Regions.
//   - cls: each crop is scaled to 48 pixels high, at most 192 wide, padded
//     right; a crop the classifier finds upside down (its 180° class above
//     ClsOptions.Thresh) is turned and marked Rotated. Two options go
//     beyond PaddleOCR, off by default: the classifier may look along a
//     whole long line in several windows (ClsOptions.Windows), and a
//     page's lines may vote on its orientation (ClsOptions.PageVote).
//     PageOrder then puts an upside-down page's lines in its own reading
//     order.
//   - rec: the crops of a batch are scaled to 48 pixels high and padded to
//     the widest's aspect ratio (at least 320/48); the model's per-step
//     class scores are decoded greedily (CTC: repeats merged, blanks
//     dropped) over the model's character list (Dict), and lines whose
//     mean confidence is under RecOptions.DropScore are dropped. One
//     option goes beyond PaddleOCR, off by default: a space the model
//     scored in a gap between two non-CJK characters but did not write
//     is read (RecOptions.SpaceScore; the model, trained on Chinese,
//     drops many narrow spaces between English words).
//
// Behaviour and defaults are PaddleOCR's (tools/infer/predict_det.py,
// predict_cls.py, predict_rec.py, predict_system.py and
// ppocr/postprocess), and its libraries' (OpenCV, Clipper: see
// internal/imaging/cv), so that results match its Python pipeline. One of
// its conventions matters for every tensor: the models were trained on
// OpenCV's BGR images, so each input's channel planes are blue, green,
// red, in that order.
package ppocr
