/* crand.c: a random sequence per thread behind rand() and srand().
 *
 * flite draws the clustergen excitation noise (mlsa_resynthesis, about one
 * draw per sample) and the diphone join's residual noise from rand(), and
 * the C layer seeds it with srand() right before each synthesis. glibc's
 * rand() is one sequence for the whole process, behind a lock: concurrent
 * syntheses would interleave their draws and differ from a lone run, so
 * they used to take turns under one process-wide lock.
 *
 * These definitions are part of the executable, and for the undefined
 * symbols of a shared library the dynamic linker searches the executable
 * before libc: libflite.so's calls to rand() (it imports rand@GLIBC_2.2.5;
 * an unversioned definition in the executable satisfies that) land here.
 * TestRandInterposed checks it on the linked test binary. Each thread has
 * its own state of the very generator glibc's rand() runs (random_r on a
 * 128-byte TYPE_3 state, which is what srand() seeds in glibc), seeded
 * with 1 until its first srand(), as glibc's is: a synthesis that seeds
 * and runs within one C call, on one thread, draws exactly what it would
 * draw alone, whatever other threads draw meanwhile. A Go callback from
 * inside that call (the vocoder's block stream) runs on the same thread
 * and draws nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crand.h"

struct omni_rng {
    struct random_data data;
    char state[128]; /* TYPE_3: 31 words and the type, as glibc's randtbl */
    int ready;
    unsigned long draws;
};

static __thread struct omni_rng rng;

static struct random_data *thread_rng(void)
{
    if (!rng.ready)
    {
        memset(&rng.data, 0, sizeof(rng.data)); /* initstate_r wants state NULL */
        initstate_r(1, rng.state, sizeof(rng.state), &rng.data);
        rng.ready = 1;
    }
    return &rng.data;
}

int rand(void)
{
    int32_t r;
    random_r(thread_rng(), &r);
    rng.draws++;
    return r;
}

void srand(unsigned int seed)
{
    srandom_r(seed, thread_rng());
}

unsigned long omni_rand_draws(void)
{
    return rng.draws;
}

void omni_rand_seq(unsigned seed, int n, int *out)
{
    int i;
    srand(seed);
    for (i = 0; i < n; i++)
        out[i] = rand();
}

int omni_libc_rand_seq(unsigned seed, int n, int *out)
{
    int (*libc_rand)(void) = (int (*)(void))dlsym(RTLD_NEXT, "rand");
    void (*libc_srand)(unsigned) = (void (*)(unsigned))dlsym(RTLD_NEXT, "srand");
    int i;
    if (libc_rand == NULL || libc_srand == NULL || libc_rand == rand)
        return -1;
    libc_srand(seed);
    for (i = 0; i < n; i++)
        out[i] = libc_rand();
    return 0;
}
