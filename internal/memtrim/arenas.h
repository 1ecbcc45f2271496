// omni_arena_limit returns the malloc arena cap set at load, or 0 when
// the environment set one (MALLOC_ARENA_MAX, GLIBC_TUNABLES).
int omni_arena_limit(void);

// omni_fastbins_off returns 1 when glibc's fast bins were turned off at
// load (M_MXFAST 0), 0 when the environment sets their size
// (GLIBC_TUNABLES glibc.malloc.mxfast).
int omni_fastbins_off(void);
