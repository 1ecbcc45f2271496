/* ccv.h is the C layer between Go and the few functions of OpenCV's
 * imgproc (ccv_opencv.cpp) and Clipper (ccv_clipper.cpp) that OCR needs.
 * No C++ exception crosses it: each function catches them and returns
 * OMNI_CV_ERR with the message in err (errlen bytes, NUL-terminated). The
 * Go side checks sizes and counts before calling. */
#ifndef OMNISTAGE_CCV_H
#define OMNISTAGE_CCV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OMNI_CV_OK 0
#define OMNI_CV_ERR 1

/* omni_cv_resize resizes the sw×sh RGB8 image src into the dw×dh dst
 * (bilinear, cv::INTER_LINEAR). */
int omni_cv_resize(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, char *err, int errlen);

/* omni_cv_warp_quad maps the quadrilateral quad (x0 y0 ... x3 y3: top-left,
 * top-right, bottom-right, bottom-left in src) onto the dw×dh dst: a
 * perspective warp, bicubic, the border replicated. */
int omni_cv_warp_quad(const uint8_t *src, int sw, int sh, const float *quad, uint8_t *dst, int dw, int dh, char *err, int errlen);

/* omni_cv_contours holds n contours: contour i has lens[i] points, all
 * points one after another in xy as x, y pairs. */
typedef struct {
	int32_t *xy;
	int32_t *lens;
	int32_t n;
} omni_cv_contours;

/* omni_cv_find_contours finds the outer and inner borders of the non-zero
 * regions of the w×h mask (cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE). The
 * caller frees out with omni_cv_contours_free. */
int omni_cv_find_contours(const uint8_t *mask, int w, int h, omni_cv_contours *out, char *err, int errlen);
void omni_cv_contours_free(omni_cv_contours *c);

/* omni_cv_min_area_rect finds the rotated rectangle of least area around
 * the n points xy and writes its corners (cv::boxPoints' order) to box and
 * its sides to size (width, height, as cv::RotatedRect has them). */
int omni_cv_min_area_rect(const int32_t *xy, int n, float *box, float *size, char *err, int errlen);

/* omni_cv_poly_mean writes to mean the mean of the w×h map m over the
 * pixels of the rectangle x0..x1, y0..y1 (inclusive) that the polygon xy
 * of n points (relative to x0, y0) covers (cv::fillPoly, cv::mean); 0
 * when it covers none. */
int omni_cv_poly_mean(const float *m, int w, int h, int x0, int y0, int x1, int y1, const int32_t *xy, int n, double *mean, char *err, int errlen);

/* omni_clip_paths holds n closed paths of integer points, as
 * omni_cv_contours holds contours. */
typedef struct {
	int64_t *xy;
	int32_t *lens;
	int32_t n;
} omni_clip_paths;

/* omni_clip_offset grows the closed polygon xy of n points by delta
 * (ClipperOffset: round joins, a closed polygon, miter limit 2, arc
 * tolerance 0.25). The caller frees out with omni_clip_paths_free. */
int omni_clip_offset(const int64_t *xy, int n, double delta, omni_clip_paths *out, char *err, int errlen);
void omni_clip_paths_free(omni_clip_paths *p);

#ifdef __cplusplus
}
#endif

#endif
