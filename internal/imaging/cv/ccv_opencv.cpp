// ccv_opencv.cpp implements ccv.h's OpenCV functions.
#include "ccv.h"

#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace {

// OpenCV runs sequentially: the server runs requests in parallel, and a
// thread pool per call would fight them for the cores.
const int sequential = (cv::setNumThreads(0), 0);

int fail(const char *what, char *err, int errlen) {
	if (errlen > 0) {
		std::strncpy(err, what, errlen - 1);
		err[errlen - 1] = 0;
	}
	return OMNI_CV_ERR;
}

}  // namespace

#define OMNI_CATCH                                            \
	catch (const std::exception &e) {                         \
		return fail(e.what(), err, errlen);                   \
	}                                                         \
	catch (...) {                                             \
		return fail("unknown C++ exception", err, errlen);   \
	}

extern "C" int omni_cv_resize(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, char *err, int errlen) {
	try {
		cv::Mat in(sh, sw, CV_8UC3, const_cast<uint8_t *>(src));
		cv::Mat out(dh, dw, CV_8UC3, dst);
		cv::resize(in, out, cv::Size(dw, dh), 0, 0, cv::INTER_LINEAR);
		if (out.data != dst) {
			return fail("cv::resize reallocated its output", err, errlen);
		}
		return OMNI_CV_OK;
	}
	OMNI_CATCH
}

extern "C" int omni_cv_warp_quad(const uint8_t *src, int sw, int sh, const float *quad, uint8_t *dst, int dw, int dh, char *err, int errlen) {
	try {
		cv::Mat in(sh, sw, CV_8UC3, const_cast<uint8_t *>(src));
		cv::Mat out(dh, dw, CV_8UC3, dst);
		cv::Point2f from[4], to[4] = {{0, 0}, {float(dw), 0}, {float(dw), float(dh)}, {0, float(dh)}};
		for (int i = 0; i < 4; i++) {
			from[i] = cv::Point2f(quad[2 * i], quad[2 * i + 1]);
		}
		cv::Mat m = cv::getPerspectiveTransform(from, to);
		cv::warpPerspective(in, out, m, cv::Size(dw, dh), cv::INTER_CUBIC, cv::BORDER_REPLICATE);
		if (out.data != dst) {
			return fail("cv::warpPerspective reallocated its output", err, errlen);
		}
		return OMNI_CV_OK;
	}
	OMNI_CATCH
}

extern "C" int omni_cv_find_contours(const uint8_t *mask, int w, int h, omni_cv_contours *out, char *err, int errlen) {
	std::memset(out, 0, sizeof *out);
	try {
		cv::Mat in(h, w, CV_8UC1, const_cast<uint8_t *>(mask));
		std::vector<std::vector<cv::Point>> contours;
		cv::findContours(in, contours, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
		size_t total = 0;
		for (const auto &c : contours) {
			total += c.size();
		}
		out->lens = static_cast<int32_t *>(std::malloc(sizeof(int32_t) * (contours.size() + 1)));
		out->xy = static_cast<int32_t *>(std::malloc(sizeof(int32_t) * (2 * total + 1)));
		if (!out->lens || !out->xy) {
			omni_cv_contours_free(out);
			return fail("out of memory", err, errlen);
		}
		size_t k = 0;
		for (const auto &c : contours) {
			out->lens[out->n++] = int32_t(c.size());
			for (const auto &p : c) {
				out->xy[k++] = p.x;
				out->xy[k++] = p.y;
			}
		}
		return OMNI_CV_OK;
	}
	OMNI_CATCH
}

extern "C" void omni_cv_contours_free(omni_cv_contours *c) {
	std::free(c->xy);
	std::free(c->lens);
	std::memset(c, 0, sizeof *c);
}

extern "C" int omni_cv_min_area_rect(const int32_t *xy, int n, float *box, float *size, char *err, int errlen) {
	try {
		std::vector<cv::Point> pts(n);
		for (int i = 0; i < n; i++) {
			pts[i] = cv::Point(xy[2 * i], xy[2 * i + 1]);
		}
		cv::RotatedRect r = cv::minAreaRect(pts);
		cv::Point2f corners[4];
		r.points(corners);
		for (int i = 0; i < 4; i++) {
			box[2 * i] = corners[i].x;
			box[2 * i + 1] = corners[i].y;
		}
		size[0] = r.size.width;
		size[1] = r.size.height;
		return OMNI_CV_OK;
	}
	OMNI_CATCH
}

extern "C" int omni_cv_poly_mean(const float *m, int w, int h, int x0, int y0, int x1, int y1, const int32_t *xy, int n, double *mean, char *err, int errlen) {
	try {
		cv::Mat in(h, w, CV_32FC1, const_cast<float *>(m));
		cv::Mat sub = in(cv::Range(y0, y1 + 1), cv::Range(x0, x1 + 1));
		cv::Mat mask = cv::Mat::zeros(y1 - y0 + 1, x1 - x0 + 1, CV_8UC1);
		std::vector<std::vector<cv::Point>> poly(1, std::vector<cv::Point>(n));
		for (int i = 0; i < n; i++) {
			poly[0][i] = cv::Point(xy[2 * i], xy[2 * i + 1]);
		}
		cv::fillPoly(mask, poly, cv::Scalar(1));
		*mean = cv::mean(sub, mask)[0];
		return OMNI_CV_OK;
	}
	OMNI_CATCH
}
