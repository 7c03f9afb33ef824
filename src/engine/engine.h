/* engine.h - the interface of src/engine: realize (schedule -> codegen ->
 * render -> runtime for each kernel), host transfers, counters, and the
 * reference evaluator that tests use as the oracle.
 */
#ifndef TC_ENGINE_H
#define TC_ENGINE_H

#include "runtime/runtime.h"

/* realizes the bases of nodes[0..n-1]: schedules, compiles and runs the
 * kernels; on success each base is a BUFFER. `api` names the public call for
 * error messages. */
tc_status tc_engine_realize(tc_node *const *nodes, int n, const char *api);
/* kernels tc_engine_realize would launch now (copies excluded), -1 on error */
int tc_engine_kernel_count(tc_node *const *nodes, int n);
/* realizes n if needed and copies its elements (row-major, n's dtype) to dst */
tc_status tc_engine_to_host(tc_node *n, void *dst, size_t nbytes, const char *api);
/* a new realized BUFFER node holding a copy of data */
tc_node *tc_engine_from_host(const void *data, tc_dtype dt, int ndim, const int64_t *shape,
                             int device);
void tc_engine_get_counters(tc_counters *out);
void tc_engine_reset_counters(void);
void tc_engine_shutdown(void); /* frees the program cache */

/* The reference evaluator (ref.c): evaluates the lazy graph under n op by op
 * on the host with plain loops over views, and writes n's elements
 * (row-major, n's dtype) to out. It shares no code with the scheduler,
 * codegen or renderers, so tests use it as the oracle. Realized buffers are
 * read back from their devices. */
tc_status tc_ref_eval(tc_node *n, void *out);

#endif /* TC_ENGINE_H */
