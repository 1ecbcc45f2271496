// ccv_clipper.cpp implements ccv.h's Clipper function.
#include "ccv.h"

#include <cstdlib>
#include <cstring>
#include <exception>

#include <clipper.hpp>

namespace {

int fail(const char *what, char *err, int errlen) {
	if (errlen > 0) {
		std::strncpy(err, what, errlen - 1);
		err[errlen - 1] = 0;
	}
	return OMNI_CV_ERR;
}

}  // namespace

extern "C" int omni_clip_offset(const int64_t *xy, int n, double delta, omni_clip_paths *out, char *err, int errlen) {
	std::memset(out, 0, sizeof *out);
	try {
		ClipperLib::Path path(n);
		for (int i = 0; i < n; i++) {
			path[i] = ClipperLib::IntPoint(xy[2 * i], xy[2 * i + 1]);
		}
		ClipperLib::ClipperOffset off(2.0, 0.25);
		off.AddPath(path, ClipperLib::jtRound, ClipperLib::etClosedPolygon);
		ClipperLib::Paths sol;
		off.Execute(sol, delta);
		size_t total = 0;
		for (const auto &p : sol) {
			total += p.size();
		}
		out->lens = static_cast<int32_t *>(std::malloc(sizeof(int32_t) * (sol.size() + 1)));
		out->xy = static_cast<int64_t *>(std::malloc(sizeof(int64_t) * (2 * total + 1)));
		if (!out->lens || !out->xy) {
			omni_clip_paths_free(out);
			return fail("out of memory", err, errlen);
		}
		size_t k = 0;
		for (const auto &p : sol) {
			out->lens[out->n++] = int32_t(p.size());
			for (const auto &q : p) {
				out->xy[k++] = q.X;
				out->xy[k++] = q.Y;
			}
		}
		return OMNI_CV_OK;
	} catch (const std::exception &e) {
		return fail(e.what(), err, errlen);
	} catch (...) {
		return fail("unknown C++ exception", err, errlen);
	}
}

extern "C" void omni_clip_paths_free(omni_clip_paths *p) {
	std::free(p->xy);
	std::free(p->lens);
	std::memset(p, 0, sizeof *p);
}
