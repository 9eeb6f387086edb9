/*
 * exit_handler.c — ACL calls from an exit handler (atexit), as C programs clean up: by then the
 * exiting thread's thread-local state is torn down. Each call returns a code (no crash, no
 * panic message): aclFinalize succeeds and ends the session; a call that needs the thread's
 * current context (gone with its locals) fails with ACL_ERROR_INVALID_CONTEXT... or succeeds.
 */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

static aclrtStream stream;

static void cleanup(void) {
    aclError destroy = aclrtDestroyStream(stream);
    aclError reset = aclrtResetDevice(0);
    /* A misuse from the handler: a code, and its message kept or not, never a crash. */
    aclError twice = aclrtDestroyStream(stream);
    const char *msg = aclGetRecentErrMsg();
    aclError fin = aclFinalize();
    aclError after = aclrtSetDevice(0);
    printf("exit handler: aclrtDestroyStream %d, again %d (%s), aclrtResetDevice %d, "
           "aclFinalize %d, aclrtSetDevice after it %d\n",
           destroy, twice, msg ? "message" : "no message", reset, fin, after);
    fflush(stdout);
    if (fin != ACL_SUCCESS || twice == ACL_SUCCESS || after != ACL_ERROR_UNINITIALIZE) {
        _Exit(1);
    }
}

int main(void) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&stream));
    void *p = NULL;
    CHECK(aclrtMalloc(&p, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    /* A failed call and a read of its message first, so that the thread's error state exists
     * (and is torn down before the handler runs). */
    if (aclrtFree(NULL) == ACL_SUCCESS || aclGetRecentErrMsg() == NULL) {
        printf("exit_handler: aclrtFree(NULL) should fail with a message\n");
        return 1;
    }
    CHECK(atexit(cleanup) == 0 ? ACL_SUCCESS : 1);
    printf("exit_handler: ok\n");
    fflush(stdout);
    return 0;
}
