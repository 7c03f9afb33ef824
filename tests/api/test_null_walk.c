/* test_null_walk.c - every TC_API function that takes a pointer, called
 * with all of them NULL (the table is generated from tinyc.h, so a new
 * function is walked too). Nothing may crash or leak (the sanitizer run
 * checks), and a call must either fail with a message that starts with its
 * own name, or be one of the few for which NULL means something (a default
 * device, "nothing to release") and then set no error. */
#include "tc_test.h"

#include <string.h>

#include "null_walk.h"
#include "tinyc.h"
#include "util/util.h"

/* the calls for which every argument NULL is meaningful, and why */
static const char *const accepts_null[] = {
    "tc_release",        /* releasing nothing: like free(NULL) */
    "tc_layer_free",     /* " */
    "tc_optimizer_free", /* " */
    "tc_jit_free",       /* " */
    "tc_mnist_release",  /* " */
    "tc_retain",         /* documented: NULL for NULL, as tc_release takes it */
    "tc_requires_grad",  /* documented: false for NULL */
    "tc_synchronize",    /* NULL: the default device */
    "tc_arange",         /* NULL: the default device (all else scalars) */
    "tc_eye",            /* " */
    "tc_nn_linear",      /* " */
    "tc_nn_conv2d",      /* " */
    "tc_nn_embedding",   /* " */
};

static bool accepted(const char *name) {
    for (size_t i = 0; i < sizeof accepts_null / sizeof *accepts_null; i++)
        if (strcmp(accepts_null[i], name) == 0) return true;
    return false;
}

static void test_every_call(void **state) {
    (void)state;
    int failed = 0;
    char prefix[128];
    assert_true(null_walk_n > 100); /* the table was read from tinyc.h */
    for (int i = 0; i < null_walk_n; i++) {
        const null_walk_call *c = &null_walk_calls[i];
        snprintf(prefix, sizeof prefix, "%s: ", c->name);
        tc_error_clear();
        c->call();
        tc_status st = tc_last_status();
        const char *msg = tc_last_error();
        bool ok;
        if (accepted(c->name)) ok = st == TC_OK || strncmp(msg, prefix, strlen(prefix)) == 0;
        else ok = st != TC_OK && strncmp(msg, prefix, strlen(prefix)) == 0;
        if (!ok) {
            fprintf(stderr, "%s(NULL...): status %s, message '%s'\n", c->name, tc_status_string(st),
                    msg);
            failed++;
        }
    }
    assert_int_equal(failed, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_call),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tc_shutdown();
    return r;
}
