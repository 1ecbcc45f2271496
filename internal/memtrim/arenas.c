// The malloc settings are made by a constructor, so that they precede the
// threads the Go runtime starts: each of them that calls malloc (cgo's
// thread start does) would otherwise get an arena of its own first.

#define _GNU_SOURCE
#include <malloc.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "arenas.h"

static int arena_limit;
static int fastbins_off;

// tuned reports whether the environment sets the malloc tunable name
// itself (GLIBC_TUNABLES=glibc.malloc.NAME=...) or through env.
static int tuned(const char *env, const char *name) {
	const char *tunables = getenv("GLIBC_TUNABLES");
	return (env != NULL && getenv(env) != NULL) || (tunables != NULL && strstr(tunables, name) != NULL);
}

__attribute__((constructor)) static void omni_malloc_settings(void) {
	if (!tuned("MALLOC_ARENA_MAX", "glibc.malloc.arena_max")) {
		cpu_set_t set;
		int n = 1;
		if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 1) {
			n = CPU_COUNT(&set);
		}
		if (mallopt(M_ARENA_MAX, n) == 1) {
			arena_limit = n;
		}
	}
	if (!tuned(NULL, "glibc.malloc.mxfast") && mallopt(M_MXFAST, 0) == 1) {
		fastbins_off = 1;
	}
}

int omni_arena_limit(void) { return arena_limit; }

int omni_fastbins_off(void) { return fastbins_off; }
