/*
 * kernel_args.c — ACL's argument builder and aclrtLaunchKernelWithConfig, and function handles
 * used across the contexts of a device, in the shape of CANN's kernel-launch samples.
 *  - vadd_f32(a, b, c, n) with pointers and a uint64_t appended one by one;
 *  - saxpy(n, alpha, x, y) with its float through npusimKernelArgsAppendFloat;
 *  - a placeholder: vadd_f32's first input is a host buffer the launch copies to the device;
 *  - aclrtKernelArgsParaUpdate between launches;
 *  - a function handle loaded in one context launched in another on the same device (and
 *    refused on another device).
 *
 * Usage: kernel_args [kernels-dir]
 */
#include <string.h>

#include "check.h"

enum { N = 4096 };

static void expect_floats(const char *what, const float *got, float (*want)(size_t)) {
    for (size_t i = 0; i < N; i++) {
        if (got[i] != want(i)) {
            fprintf(stderr, "%s: [%zu] = %f, expected %f\n", what, i, got[i], want(i));
            exit(1);
        }
    }
}

static float twice_i(size_t i) { return 2.0f * (float)i; }
static float saxpy_want(size_t i) { return 3.0f * (float)i + 1.0f; }
static float placeholder_want(size_t i) { return 0.5f + (float)i; }
static float half_n(size_t i) { return i < N / 2 ? 2.0f * (float)i : 0.0f; }

int main(int argc, char **argv) {
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtContext context;
    CHECK(aclrtCreateContext(&context, 0));
    aclrtStream stream;
    CHECK(aclrtCreateStream(&stream));
    aclrtBinHandle vbin, sbin;
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "vector_add.o"), NULL, &vbin));
    CHECK(aclrtBinaryLoadFromFile(kernel_path(argc, argv, "saxpy.o"), NULL, &sbin));
    aclrtFuncHandle vadd, saxpy;
    CHECK(aclrtBinaryGetFunction(vbin, "vadd_f32", &vadd));
    CHECK(aclrtBinaryGetFunction(sbin, "saxpy", &saxpy));

    const size_t bytes = N * sizeof(float);
    float *host;
    CHECK(aclrtMallocHost((void **)&host, bytes));
    for (size_t i = 0; i < N; i++) {
        host[i] = (float)i;
    }
    void *x, *y;
    CHECK(aclrtMalloc(&x, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&y, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(x, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));

    /* vadd_f32(x, x, y, N), argument by argument. */
    size_t mem = 0;
    CHECK(aclrtKernelArgsGetHandleMemSize(vadd, &mem));
    EXPECT(mem > 0);
    CHECK(aclrtKernelArgsGetMemSize(vadd, 32, &mem));
    EXPECT(mem >= 32);
    aclrtArgsHandle args;
    CHECK(aclrtKernelArgsInit(vadd, &args));
    aclrtParamHandle p_a, p_b, p_c, p_n, q0;
    CHECK(aclrtKernelArgsAppend(args, &x, sizeof x, &p_a));
    CHECK(aclrtKernelArgsAppend(args, &x, sizeof x, &p_b));
    CHECK(aclrtKernelArgsAppend(args, &y, sizeof y, &p_c));
    uint64_t n = N;
    CHECK(aclrtKernelArgsAppend(args, &n, sizeof n, &p_n));
    EXPECT_CODE(aclrtKernelArgsAppend(args, &n, 3, &p_n), ACL_ERROR_INVALID_PARAM);
    /* Not finalized yet: not launchable. */
    EXPECT_CODE(aclrtLaunchKernelWithConfig(vadd, 4, stream, NULL, args, NULL),
                ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtKernelArgsFinalize(args));
    EXPECT_CODE(aclrtKernelArgsAppend(args, &n, sizeof n, &p_n), ACL_ERROR_INVALID_PARAM);
    aclrtLaunchKernelAttr attr;
    memset(&attr, 0, sizeof attr);
    attr.id = ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT;
    attr.value.timeout = 10;
    aclrtLaunchKernelCfg cfg = {&attr, 1};
    CHECK(aclrtLaunchKernelWithConfig(vadd, 4, stream, &cfg, args, NULL));
    CHECK(aclrtMemcpyAsync(host, bytes, y, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    expect_floats("vadd through aclrtKernelArgs", host, twice_i);
    /* Wrong function for these arguments. */
    EXPECT_CODE(aclrtLaunchKernelWithConfig(saxpy, 4, stream, NULL, args, NULL),
                ACL_ERROR_INVALID_PARAM);

    /* An args handle in the caller's memory (aclrtKernelArgsInitByUserMem), same arguments. */
    size_t handle_size = 0, args_size = 0;
    CHECK(aclrtKernelArgsGetHandleMemSize(vadd, &handle_size));
    CHECK(aclrtKernelArgsGetMemSize(vadd, 4 * sizeof(uint64_t), &args_size));
    void *handle_mem = malloc(handle_size);
    void *args_mem = malloc(args_size);
    EXPECT(handle_mem != NULL && args_mem != NULL);
    CHECK(aclrtKernelArgsInitByUserMem(vadd, (aclrtArgsHandle)handle_mem, args_mem, args_size));
    aclrtArgsHandle uargs = (aclrtArgsHandle)handle_mem;
    CHECK(aclrtKernelArgsAppend(uargs, &x, sizeof x, &q0));
    CHECK(aclrtKernelArgsAppend(uargs, &x, sizeof x, &q0));
    CHECK(aclrtKernelArgsAppend(uargs, &y, sizeof y, &q0));
    CHECK(aclrtKernelArgsAppend(uargs, &n, sizeof n, &q0));
    CHECK(aclrtKernelArgsFinalize(uargs));
    CHECK(aclrtMemset(y, bytes, 0, bytes));
    CHECK(aclrtLaunchKernelWithConfig(vadd, 4, stream, NULL, uargs, NULL));
    CHECK(aclrtMemcpyAsync(host, bytes, y, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    expect_floats("vadd through caller-memory args", host, twice_i);

    /* ParaUpdate: only the first half this time. */
    CHECK(aclrtMemset(y, bytes, 0, bytes));
    uint64_t half = N / 2;
    CHECK(aclrtKernelArgsParaUpdate(args, p_n, &half, sizeof half));
    CHECK(aclrtLaunchKernelWithConfig(vadd, 2, stream, NULL, args, NULL));
    CHECK(aclrtMemcpyAsync(host, bytes, y, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    expect_floats("vadd after aclrtKernelArgsParaUpdate", host, half_n);

    /* saxpy(N, 3.0f, x, y) with y = 1: a float argument. */
    for (size_t i = 0; i < N; i++) {
        host[i] = 1.0f;
    }
    CHECK(aclrtMemcpy(y, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    aclrtArgsHandle sargs;
    CHECK(aclrtKernelArgsInit(saxpy, &sargs));
    aclrtParamHandle q;
    CHECK(aclrtKernelArgsAppend(sargs, &n, sizeof n, &q));
    CHECK(npusimKernelArgsAppendFloat(sargs, 3.0f, &q));
    CHECK(aclrtKernelArgsAppend(sargs, &x, sizeof x, &q));
    CHECK(aclrtKernelArgsAppend(sargs, &y, sizeof y, &q));
    CHECK(aclrtKernelArgsFinalize(sargs));
    CHECK(aclrtLaunchKernelWithConfig(saxpy, 4, stream, NULL, sargs, NULL));
    CHECK(aclrtMemcpyAsync(host, bytes, y, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    expect_floats("saxpy with a float argument", host, saxpy_want);

    /* A placeholder: vadd_f32(<buffer>, zeros, y, N), the buffer filled on the host. */
    void *zeros;
    CHECK(aclrtMalloc(&zeros, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(zeros, bytes, 0, bytes));
    aclrtArgsHandle pargs;
    CHECK(aclrtKernelArgsInit(vadd, &pargs));
    aclrtParamHandle ph;
    CHECK(aclrtKernelArgsAppendPlaceHolder(pargs, &ph));
    CHECK(aclrtKernelArgsAppend(pargs, &zeros, sizeof zeros, &q));
    CHECK(aclrtKernelArgsAppend(pargs, &y, sizeof y, &q));
    CHECK(aclrtKernelArgsAppend(pargs, &n, sizeof n, &q));
    CHECK(aclrtKernelArgsFinalize(pargs));
    EXPECT_CODE(aclrtLaunchKernelWithConfig(vadd, 4, stream, NULL, pargs, NULL),
                ACL_ERROR_INVALID_PARAM); /* the placeholder has no buffer yet */
    float *buf = NULL;
    CHECK(aclrtKernelArgsGetPlaceHolderBuffer(pargs, ph, bytes, (void **)&buf));
    EXPECT(buf != NULL);
    for (size_t i = 0; i < N; i++) {
        buf[i] = 0.5f + (float)i;
    }
    CHECK(aclrtLaunchKernelWithConfig(vadd, 4, stream, NULL, pargs, NULL));
    memset(buf, 0, bytes); /* the launch took its copy */
    CHECK(aclrtMemcpyAsync(host, bytes, y, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    expect_floats("vadd with a placeholder input", host, placeholder_want);
    EXPECT_CODE(aclrtKernelArgsGetPlaceHolderBuffer(pargs, p_a, 16, (void **)&buf),
                ACL_ERROR_RT_PARAM_INVALID);

    /* The vadd function handle of this context, launched from another one on device 0. */
    aclrtContext other;
    CHECK(aclrtCreateContext(&other, 0));
    aclrtStream os;
    CHECK(aclrtCreateStream(&os));
    void *ox, *oy;
    CHECK(aclrtMalloc(&ox, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&oy, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    for (size_t i = 0; i < N; i++) {
        host[i] = (float)i;
    }
    CHECK(aclrtMemcpy(ox, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    VaddArgs va = {ox, ox, oy, N};
    CHECK(aclrtLaunchKernel(vadd, 4, &va, sizeof va, os));
    CHECK(aclrtLaunchKernel(vadd, 4, &va, sizeof va, os)); /* loaded once, used twice */
    CHECK(aclrtMemcpyAsync(host, bytes, oy, bytes, ACL_MEMCPY_DEVICE_TO_HOST, os));
    CHECK(aclrtSynchronizeStream(os));
    expect_floats("vadd launched in another context", host, twice_i);
    CHECK(aclrtDestroyStreamForce(os));
    CHECK(aclrtDestroyContext(other));

    /* On another device the binary is not there: the launch is refused, as in ACL. */
    uint32_t devices = 0;
    CHECK(aclrtGetDeviceCount(&devices));
    EXPECT(devices == 2); /* the test runs this program with NPUSIM_DEVICES=2 */
    aclrtContext remote;
    CHECK(aclrtCreateContext(&remote, 1));
    void *rx;
    CHECK(aclrtMalloc(&rx, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    VaddArgs ra = {rx, rx, rx, N};
    EXPECT_CODE(aclrtLaunchKernel(vadd, 1, &ra, sizeof ra, NULL), ACL_ERROR_RT_STREAM_CONTEXT);
    (void)aclGetRecentErrMsg();
    CHECK(aclrtFree(rx));
    CHECK(aclrtDestroyContext(remote));

    CHECK(aclrtSetCurrentContext(context));
    CHECK(aclrtFree(x));
    CHECK(aclrtFree(y));
    CHECK(aclrtFree(zeros));
    CHECK(aclrtFreeHost(host));
    CHECK(aclrtBinaryUnLoad(vbin));
    free(handle_mem);
    free(args_mem);
    CHECK(aclrtBinaryUnLoad(sbin));
    /* The args handles went with their binaries. */
    EXPECT_CODE(aclrtKernelArgsFinalize(args), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtDestroyStreamForce(stream));
    CHECK(aclrtDestroyContext(context));
    CHECK(aclrtResetDeviceForce(0));
    CHECK(aclFinalize());
    printf("kernel_args: ok\n");
    return 0;
}
