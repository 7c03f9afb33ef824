/* mock_cuda.h - the test-only entry points of the mock CUDA driver
 * (tests/runtime/mock_cuda.c, libtc_mock_cuda.so), besides the driver API it
 * stands in for. Tests find them with dlsym in the library TC_CUDA_LIB names;
 * the typedefs below are the pointer types to cast dlsym's answer to.
 */
#ifndef TC_MOCK_CUDA_H
#define TC_MOCK_CUDA_H

/* violations recorded since load or the last mock_cuda_reset */
int mock_cuda_violations(void);
typedef int (*mock_cuda_violations_fn)(void);
/* the text of violation i (the first 32 are kept); NULL past them */
const char *mock_cuda_violation(int i);
typedef const char *(*mock_cuda_violation_fn)(int i);
/* clears the violations, the call counts and the launch count */
void mock_cuda_reset(void);
typedef void (*mock_cuda_reset_fn)(void);
/* sets the error injection spec "NAME:N[+][:CODE],..." (NULL or "": none;
 * N+: the Nth call and every later one);
 * call counts for it start at 0 now. -1 (nothing changed) on a bad spec. */
int mock_cuda_fail(const char *spec);
typedef int (*mock_cuda_fail_fn)(const char *spec);
/* calls to driver entry point `name` since load or reset (-1: unknown name);
 * name NULL: launches that passed every check */
long mock_cuda_calls(const char *name);
typedef long (*mock_cuda_calls_fn)(const char *name);
/* live allocations, loaded modules and primary-context references now */
void mock_cuda_live(int *n_alloc, int *n_modules, int *ctx_refs);
typedef void (*mock_cuda_live_fn)(int *n_alloc, int *n_modules, int *ctx_refs);

#endif /* TC_MOCK_CUDA_H */
