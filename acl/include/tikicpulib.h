/*
 * tikicpulib.h — the entry points of CANN's CPU twin-debug library, on npusim.
 *
 * A test `main` written for Huawei's CPU twin-debug build (`#ifdef ASCENDC_CPU_DEBUG`):
 *
 *     #include "tikicpulib.h"
 *     extern "C" __global__ __aicore__ void add_custom(GM_ADDR x, GM_ADDR y, GM_ADDR z);
 *     uint8_t *x = (uint8_t *)AscendC::GmAlloc(bytes);        // host-visible "global memory"
 *     AscendC::SetKernelMode(KernelMode::AIV_MODE);
 *     ICPU_RUN_KF(add_custom, blockDim, x, y, z);             // runs the kernel, returns when done
 *     AscendC::GmFree((void *)x);
 *
 * builds and runs unchanged against npusim: the kernel runs on the simulated NPU (compiled for its
 * AI core by `scripts/npusim-ascendc.sh --cpu-debug`, which also generates the host definition of
 * `add_custom` that ICPU_RUN_KF calls), in simulated time (`NPUSIM_PROFILE=summary` prints it when
 * the program exits). Memory from GmAlloc is host memory mirrored in device memory: before a run
 * every live GmAlloc block is copied to the device, after it back, so the host reads the kernel's
 * results as it would from the twin's shared memory. A kernel argument that points into a GmAlloc
 * block is passed as the device address of the same byte.
 *
 * The session: the first GmAlloc or ICPU_RUN_KF calls aclInit (unless the program did),
 * aclrtSetDevice(NPUSIM_ICPU_DEVICE, default 0) and creates a stream; at exit the stream goes and,
 * if this header started the session, aclFinalize runs. A failed run (a pointer argument outside
 * every GmAlloc block, a kernel fault, a launch error) prints `ICPU_RUN_KF(kernel): ...` with the
 * ACL error code and message to stderr and exits the process with status 1, as a fault in the
 * twin ends the test; ICPU_RUN_KF has no return value to carry it.
 */
#ifndef NPUSIM_TIKICPULIB_H
#define NPUSIM_TIKICPULIB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <thread>
#include <vector>

#include "acl/acl.h"

#ifndef __global__
#define __global__
#endif
#ifndef __aicore__
#define __aicore__
#endif
#ifndef __gm__
#define __gm__
#endif
#ifndef GM_ADDR
#define GM_ADDR uint8_t *
#endif

/* The core types a twin-debug run models (CANN's values). npusim places a kernel on cores by what
 * its program uses (docs/ascendc.md), so the mode is recorded and has no further effect. */
enum class KernelMode { MIX_MODE = 0, AIC_MODE, AIV_MODE, MIX_AIC_1_1 };

namespace npusim_icpu {

/* One GmAlloc block: the host bytes the program uses and their device mirror. */
struct Block {
    uint8_t *host;
    void *device;
    size_t size;
};

struct State {
    bool started = false;
    bool own_session = false;
    int32_t device = 0;
    aclrtStream stream = nullptr;
    std::vector<Block> blocks;
    KernelMode mode = KernelMode::AIV_MODE;
    uint64_t tiling_key = 0;
    /* The run in progress (set by ICPU_RUN_KF around the kernel's host definition). */
    const char *kernel = nullptr;
    uint32_t block_dim = 0;
    uint32_t status = ACL_SUCCESS;
    bool launched = false;
};

/* The process's one state (never destroyed: the exit handler below still uses it). */
inline State &state() {
    static State *s = new State;
    return *s;
}

[[noreturn]] inline void fail(const char *what, const char *kernel, uint32_t code) {
    const char *msg = aclGetRecentErrMsg();
    fprintf(stderr, "ICPU_RUN_KF(%s): %s: aclError %u%s%s\n", kernel ? kernel : "-", what, code,
            msg && *msg ? ": " : "", msg && *msg ? msg : "");
    fflush(stderr);
    exit(1);
}

/* The exit handler: the session's end. It runs on a thread of its own, because by the time exit
 * handlers run, the exiting thread's thread-local state (which the runtime keeps per thread, as
 * ACL keeps the current context per thread) is gone. */
inline void finish_now() {
    State &s = state();
    if (s.own_session) {
        aclFinalize(); /* every stream and allocation goes with the session */
        return;
    }
    aclrtSetDevice(s.device);
    for (Block &b : s.blocks) {
        aclrtFree(b.device);
    }
    aclrtDestroyStream(s.stream);
    aclrtResetDevice(s.device);
    aclrtResetDevice(s.device);
}

inline void finish() {
    State &s = state();
    if (!s.started) {
        return;
    }
    fflush(NULL);
    std::thread(finish_now).join();
    for (Block &b : s.blocks) {
        free(b.host);
    }
    s.blocks.clear();
    s.started = false;
}

/* Starts the session on first use. */
inline State &start() {
    State &s = state();
    if (s.started) {
        return s;
    }
    aclError err = aclInit(nullptr);
    if (err != ACL_SUCCESS && err != ACL_ERROR_REPEAT_INITIALIZE) {
        fail("aclInit", nullptr, err);
    }
    s.own_session = err == ACL_SUCCESS;
    const char *dev = getenv("NPUSIM_ICPU_DEVICE");
    s.device = dev ? atoi(dev) : 0;
    if ((err = aclrtSetDevice(s.device)) != ACL_SUCCESS) {
        fail("aclrtSetDevice", nullptr, err);
    }
    if ((err = aclrtCreateStream(&s.stream)) != ACL_SUCCESS) {
        fail("aclrtCreateStream", nullptr, err);
    }
    s.started = true;
    atexit(finish);
    return s;
}

/* The device address of a host pointer into a GmAlloc block (nullptr stays nullptr). */
inline void *device(const void *host) {
    State &s = state();
    if (host == nullptr) {
        return nullptr;
    }
    const uint8_t *p = static_cast<const uint8_t *>(host);
    for (const Block &b : s.blocks) {
        if (p >= b.host && p < b.host + b.size) {
            return static_cast<uint8_t *>(b.device) + (p - b.host);
        }
    }
    fprintf(stderr, "ICPU_RUN_KF(%s): a pointer argument (%p) is not in memory from AscendC::GmAlloc\n",
            s.kernel ? s.kernel : "-", host);
    s.status = ACL_ERROR_INVALID_PARAM;
    return nullptr;
}

/* Called by the generated host definition of a kernel: the run's block count and stream, or
 * nullptr when the kernel is called outside ICPU_RUN_KF. */
inline State *current() {
    State &s = state();
    if (s.kernel == nullptr) {
        fprintf(stderr, "npusim: a kernel's host definition was called outside ICPU_RUN_KF\n");
        return nullptr;
    }
    s.launched = true;
    return &s;
}

template <class F> void run(const char *kernel, uint32_t block_dim, F call) {
    State &s = start();
    for (const Block &b : s.blocks) {
        aclError err = aclrtMemcpy(b.device, b.size, b.host, b.size, ACL_MEMCPY_HOST_TO_DEVICE);
        if (err != ACL_SUCCESS) {
            fail("copying GmAlloc memory to the device", kernel, err);
        }
    }
    s.kernel = kernel;
    s.block_dim = block_dim;
    s.status = ACL_SUCCESS;
    s.launched = false;
    call();
    s.kernel = nullptr;
    if (s.status != ACL_SUCCESS) {
        fail("launch", kernel, s.status);
    }
    aclError err = aclrtSynchronizeStream(s.stream);
    if (err != ACL_SUCCESS) {
        fail("kernel", kernel, err);
    }
    for (const Block &b : s.blocks) {
        err = aclrtMemcpy(b.host, b.size, b.device, b.size, ACL_MEMCPY_DEVICE_TO_HOST);
        if (err != ACL_SUCCESS) {
            fail("copying GmAlloc memory from the device", kernel, err);
        }
    }
}

} // namespace npusim_icpu

namespace AscendC {
using ::KernelMode;

/* `size` bytes of host memory mirrored in device memory (zeroed), 64-byte aligned. */
inline void *GmAlloc(size_t size) {
    npusim_icpu::State &s = npusim_icpu::start();
    size_t bytes = size == 0 ? 64 : (size + 63) / 64 * 64;
    uint8_t *host = static_cast<uint8_t *>(aligned_alloc(64, bytes));
    if (host == nullptr) {
        return nullptr;
    }
    memset(host, 0, bytes);
    void *dev = nullptr;
    aclError err = aclrtMalloc(&dev, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
    if (err != ACL_SUCCESS) {
        free(host);
        fprintf(stderr, "AscendC::GmAlloc(%zu): aclrtMalloc: aclError %d\n", size, err);
        return nullptr;
    }
    s.blocks.push_back(npusim_icpu::Block{host, dev, bytes});
    return host;
}

/* Frees a GmAlloc block; a pointer that is not one is reported and ignored. */
inline void GmFree(void *ptr) {
    npusim_icpu::State &s = npusim_icpu::state();
    for (size_t i = 0; i < s.blocks.size(); ++i) {
        if (s.blocks[i].host == ptr) {
            aclrtFree(s.blocks[i].device);
            free(s.blocks[i].host);
            s.blocks.erase(s.blocks.begin() + static_cast<long>(i));
            return;
        }
    }
    fprintf(stderr, "AscendC::GmFree(%p): not memory from AscendC::GmAlloc (or freed already)\n", ptr);
}

inline void SetKernelMode(KernelMode mode) { npusim_icpu::state().mode = mode; }
} // namespace AscendC

/* ICPU_RUN_KF(kernel, blockDim, args...): runs the kernel on blockDim blocks and returns when it
 * has finished. */
#define ICPU_RUN_KF(func, blockdim, ...)                                                           \
    ::npusim_icpu::run(#func, static_cast<uint32_t>(blockdim), [&]() { func(__VA_ARGS__); })

/* ICPU_SET_TILING_KEY(key): the tiling key of the next runs. npusim's layer has no
 * TILING_KEY_IS, so a kernel that branches on the key does not compile; the key is recorded. */
#define ICPU_SET_TILING_KEY(key) (::npusim_icpu::state().tiling_key = static_cast<uint64_t>(key))

#endif
