/* error.c - the thread-local error state behind tc_last_error/tc_last_status.
 * Messages are formatted into a fixed buffer, so reporting never allocates. */
#include "util.h"

#include <string.h>

static _Thread_local char err_msg[2048]; /* last message on this thread */
static _Thread_local tc_status err_code;  /* last code on this thread */

tc_status tc_error_set(tc_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    err_code = code;
    return code;
}

tc_status tc_error_internal(const char *file, int line, const char *fmt, ...) {
    char what[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tc_error_set(TC_ERR_INTERNAL, "internal error at %s:%d: %s", file, line, what);
}

tc_status tc_error_code(void) {
    return err_code;
}

void tc_error_clear(void) {
    err_msg[0] = 0;
    err_code = TC_OK;
}

/* the public accessors live here so the message buffer stays private */
TC_API const char *tc_last_error(void) {
    return err_msg;
}

TC_API tc_status tc_last_status(void) {
    return err_code;
}

TC_API const char *tc_status_string(tc_status s) {
    static const char *const names[TC_ERR_COUNT] = {
        [TC_OK] = "TC_OK",
        [TC_ERR_INVALID] = "TC_ERR_INVALID",
        [TC_ERR_SHAPE] = "TC_ERR_SHAPE",
        [TC_ERR_DTYPE] = "TC_ERR_DTYPE",
        [TC_ERR_DEVICE] = "TC_ERR_DEVICE",
        [TC_ERR_MEMORY] = "TC_ERR_MEMORY",
        [TC_ERR_COMPILE] = "TC_ERR_COMPILE",
        [TC_ERR_RUNTIME] = "TC_ERR_RUNTIME",
        [TC_ERR_IO] = "TC_ERR_IO",
        [TC_ERR_INTERNAL] = "TC_ERR_INTERNAL",
    };
    return s >= 0 && s < TC_ERR_COUNT ? names[s] : "unknown status";
}
