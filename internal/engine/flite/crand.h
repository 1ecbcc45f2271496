/* crand.h: the per-thread random sequence behind rand() and srand() (see
 * crand.c), and what the tests read of it. */
#ifndef OMNISTAGE_CRAND_H
#define OMNISTAGE_CRAND_H

/* omni_rand_draws is how many times the calling thread has called rand(). */
unsigned long omni_rand_draws(void);

/* omni_rand_seq writes the n values rand() returns after srand(seed) on
 * the calling thread into out. */
void omni_rand_seq(unsigned seed, int n, int *out);

/* omni_libc_rand_seq is omni_rand_seq with libc's own rand() and srand(),
 * found with dlsym(RTLD_NEXT): the sequence this file must reproduce. It
 * returns -1 when libc's functions cannot be found. It changes libc's one
 * process-wide sequence, which nothing else in the process draws from. */
int omni_libc_rand_seq(unsigned seed, int n, int *out);

#endif
