/* error.c - the thread-local error state behind tc_last_error/tc_last_status.
 * Messages are formatted into a fixed buffer, so reporting never allocates. */
#include "util.h"

#include <string.h>

static _Thread_local char err_msg[TC_ERROR_MSG_MAX]; /* last message on this thread */
static _Thread_local tc_status err_code;              /* last code on this thread */
static _Thread_local unsigned long long err_seq;      /* errors set on this thread so far */
static _Thread_local const char *api_name;            /* outermost open public call; NULL: none */
static _Thread_local unsigned long long api_seq;      /* err_seq when api_name opened */

/* true when msg already starts with "name:" */
static bool named(const char *msg, const char *name) {
    size_t n = strlen(name);
    return strncmp(msg, name, n) == 0 && msg[n] == ':';
}

/* appends src at buf[*at], cut to leave room for the terminator */
static void append(char *buf, size_t cap, size_t *at, const char *src) {
    while (*src && *at + 1 < cap) buf[(*at)++] = *src++;
    buf[*at] = 0;
}

tc_status tc_error_set(tc_status code, const char *fmt, ...) {
    char what[TC_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    size_t at = 0;
    err_msg[0] = 0;
    if (api_name && !named(what, api_name)) { /* "name: what", cut to the buffer */
        append(err_msg, sizeof err_msg, &at, api_name);
        append(err_msg, sizeof err_msg, &at, ": ");
    }
    append(err_msg, sizeof err_msg, &at, what);
    err_code = code;
    err_seq++;
    return code;
}

tc_api_frame tc_api_enter(const char *name) {
    tc_api_frame f = {api_name, api_seq};
    if (!api_name) {
        api_name = name;
        api_seq = err_seq;
    }
    return f;
}

void tc_api_leave(tc_api_frame *f) {
    api_name = f->prev;
    api_seq = f->seq;
}

tc_status tc_error_or(tc_status fallback) {
    bool fresh = api_name ? err_seq != api_seq : err_code != TC_OK;
    if (fresh && err_code != TC_OK) return err_code;
    return tc_error_set(fallback, "failed with %s; the failing step recorded no detail",
                        tc_status_string(fallback));
}

void tc_error_save(tc_error_state *st) {
    st->code = err_code;
    st->seq = err_seq;
    memcpy(st->msg, err_msg, strlen(err_msg) + 1);
}

void tc_error_restore(const tc_error_state *st) {
    err_code = st->code;
    err_seq = st->seq;
    memcpy(err_msg, st->msg, strlen(st->msg) + 1);
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
