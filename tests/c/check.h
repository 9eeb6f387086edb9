/*
 * check.h — tiny assertion helpers for the C programs that test npusim's ACL API.
 * Each program prints "<name>: ok" and exits 0 when every check passed; on the first failure
 * it prints where, what and aclGetRecentErrMsg(), and exits 1.
 */
#ifndef NPUSIM_TESTS_C_CHECK_H_
#define NPUSIM_TESTS_C_CHECK_H_

#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"

static inline const char *recent_msg(void) {
    const char *m = aclGetRecentErrMsg();
    return m ? m : "(no message)";
}

/* The call must succeed. */
#define CHECK(call)                                                                          \
    do {                                                                                     \
        aclError e_ = (call);                                                                \
        if (e_ != ACL_SUCCESS) {                                                             \
            fprintf(stderr, "%s:%d: %s returned %d\n  %s\n", __FILE__, __LINE__, #call, e_,  \
                    recent_msg());                                                           \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* The call must fail with exactly `code`. */
#define EXPECT_CODE(call, code)                                                              \
    do {                                                                                     \
        aclError e_ = (call);                                                                \
        if (e_ != (code)) {                                                                  \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d (%s)\n  %s\n", __FILE__,     \
                    __LINE__, #call, e_, (code), #code, recent_msg());                       \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* A condition that must hold. */
#define EXPECT(cond)                                                                         \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);              \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

/* Path of kernel object `name` in the directory given as argv[1] (default examples/kernels). */
static inline const char *kernel_path(int argc, char **argv, const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", argc > 1 ? argv[1] : "examples/kernels", name);
    return buf;
}

/* The argument buffer of vadd_f32(a, b, c, n): one 8-byte slot per argument. */
typedef struct {
    void *a;
    void *b;
    void *c;
    uint64_t n;
} VaddArgs;

#endif /* NPUSIM_TESTS_C_CHECK_H_ */
