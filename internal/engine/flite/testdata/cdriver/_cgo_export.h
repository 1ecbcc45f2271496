/* _cgo_export.h stands in for the header cgo generates when cflite.c is
 * built into a C program (driver.c) instead of the Go package: driver.c
 * defines omniStreamBlock. */
#include <stdint.h>
int omniStreamBlock(uintptr_t h, short *samples, int n, int rate);
