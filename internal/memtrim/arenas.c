// The malloc arena cap is set by a constructor, so that it precedes the
// threads the Go runtime starts: each of them that calls malloc (cgo's
// thread start does) would otherwise get an arena of its own first.

#define _GNU_SOURCE
#include <malloc.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "arenas.h"

static int arena_limit;

__attribute__((constructor)) static void omni_limit_arenas(void) {
	const char *tunables = getenv("GLIBC_TUNABLES");
	if (getenv("MALLOC_ARENA_MAX") != NULL ||
	    (tunables != NULL && strstr(tunables, "glibc.malloc.arena_max") != NULL)) {
		return;
	}
	cpu_set_t set;
	int n = 1;
	if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 1) {
		n = CPU_COUNT(&set);
	}
	if (mallopt(M_ARENA_MAX, n) == 1) {
		arena_limit = n;
	}
}

int omni_arena_limit(void) { return arena_limit; }
