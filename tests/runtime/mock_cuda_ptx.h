/* mock_cuda_ptx.h - the PTX interpreter of the mock CUDA driver
 * (mock_cuda_ptx.c), used by mock_cuda.c to make launches compute.
 *
 * ptx_load decodes the PTX text NVRTC makes for libtinyc's kernels into
 * instruction arrays (one per .entry) plus the module's initialized .global
 * variables; ptx_run runs one kernel over a grid, block by block, each
 * block's threads cooperatively (a thread runs until bar.sync or ret; the
 * block resumes once every live thread has arrived), each thread with its
 * own registers and .local depot. Every address space is host memory: device
 * pointers are host pointers (the mock allocates them), shared memory is a
 * buffer per block, locals a buffer per thread. Loads and stores are checked:
 * global ones must lie inside one live allocation (ask_range) or a module
 * variable, shared and local ones inside their buffers, all naturally
 * aligned. An instruction the decoder does not know makes the kernel
 * uninterpretable: ptx_run then fails naming it (never a silent wrong value).
 */
#ifndef TC_MOCK_CUDA_PTX_H
#define TC_MOCK_CUDA_PTX_H

#include <stddef.h>
#include <stdint.h>

typedef struct ptx_module ptx_module;
typedef struct ptx_kernel ptx_kernel;

/* the live allocation holding address p: true with [*base, *base + *size) */
typedef int (*ptx_range_fn)(uintptr_t p, uintptr_t *base, size_t *size);

/* PTX text -> a decoded module; NULL with err filled (out of memory or a
 * malformed .entry). Kernels with unknown instructions still load. */
ptx_module *ptx_load(const char *text, char *err, size_t err_size);
void ptx_free(ptx_module *m); /* NULL is fine */

/* the facts the launch checks need: kernels in m in .entry order, a
 * kernel's name, its .param count, whether param i is a .u64 (a pointer for
 * libtinyc), its static .shared bytes (its own and the module's, laid out
 * with their alignment) and its .maxntid x*y*z (0: none) */
int ptx_count(const ptx_module *m);
ptx_kernel *ptx_at(ptx_module *m, int i);
const char *ptx_name(const ptx_kernel *k);
int ptx_n_params(const ptx_kernel *k);
int ptx_param_is_u64(const ptx_kernel *k, int i);
size_t ptx_shared_bytes(const ptx_kernel *k);
unsigned ptx_maxntid(const ptx_kernel *k);

/* runs k on grid x block with params (params[i] points at the i-th value).
 * Returns 0; -1 with err saying what went wrong where (an access out of
 * bounds or misaligned, a runaway thread); -2 when k has an instruction or
 * directive the interpreter does not know (err names it). */
int ptx_run(ptx_kernel *k, const unsigned grid[3], const unsigned block[3], void **params,
            ptx_range_fn ask_range, char *err, size_t err_size);

#endif /* TC_MOCK_CUDA_PTX_H */
