package flite

// The per-thread random sequence that flite's noise is drawn from
// (crand.c), as the tests read it.

/*
#include "crand.h"
*/
import "C"

import "errors"

// threadDraws is how many times the calling thread has drawn from rand().
// The caller locks its goroutine to its thread to read it meaningfully.
func threadDraws() uint64 { return uint64(C.omni_rand_draws()) }

// randSeq returns the first n values of rand() after srand(seed), drawn on
// the calling thread.
func randSeq(seed uint32, n int) []int32 {
	out := make([]C.int, n)
	C.omni_rand_seq(C.uint(seed), C.int(n), &out[0])
	return toInt32(out)
}

// libcRandSeq is randSeq with libc's own rand and srand.
func libcRandSeq(seed uint32, n int) ([]int32, error) {
	out := make([]C.int, n)
	if C.omni_libc_rand_seq(C.uint(seed), C.int(n), &out[0]) != 0 {
		return nil, errors.New("libc's rand and srand not found behind this executable's")
	}
	return toInt32(out), nil
}

func toInt32(cs []C.int) []int32 {
	out := make([]int32, len(cs))
	for i, c := range cs {
		out[i] = int32(c)
	}
	return out
}
