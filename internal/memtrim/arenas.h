// omni_arena_limit returns the malloc arena cap set at load, or 0 when
// the environment set one (MALLOC_ARENA_MAX, GLIBC_TUNABLES).
int omni_arena_limit(void);
