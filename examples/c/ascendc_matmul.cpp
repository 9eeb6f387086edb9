// ascendc_matmul.cpp — the host side of a Matmul-API kernel, as CANN's MatmulInvocationNeo
// sample writes it: the platform (tiling/platform/platform_ascendc.h) gives the core count,
// MultiCoreMatmulTiling (tiling/tiling_api.h) splits M x N x K over the cores into a
// TCubeTiling, the tiling goes to device memory, and the kernels of
// examples/ascendc/matmul_api.cpp run on (usedCoreNum + 1) / 2 AI cores (two AIV blocks each).
// Both results are checked against a CPU loop in the cube's order — half products exact in
// float, each element's products added in K order — bit for bit.
//
//   matmul_api_host [M N K [SINGLE_M SINGLE_N [BASE_M BASE_N BASE_K [DIM]]]]
//
// (512 1024 512 by default) prints the tiling and "... bit for bit". SINGLE_* fix one core's
// share (SetSingleShape), BASE_* one cube step (SetFixSplit), DIM the cores the split may use
// (SetDim; the AIV cores by default); -1 leaves a value to the tiling.
//
// Build and run (one line):
//   make -f examples/c/ascendc.mk KERNEL=examples/ascendc/matmul_api.cpp STEM=matmul_api
//        MAIN=examples/c/ascendc_matmul.cpp run
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "acl/acl.h"
#include "aclrtlaunch_matmul_api.h"
#include "aclrtlaunch_matmul_api_iterate.h"
#include "kernel_tiling/kernel_tiling.h"
#include "tiling/platform/platform_ascendc.h"
#include "tiling/tiling_api.h"

#define CHECK(call)                                                                                \
    do {                                                                                           \
        int err_ = (int)(call);                                                                    \
        if (err_ != 0) {                                                                           \
            std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, err_);       \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

static void *ToDevice(const void *host, size_t bytes) {
    void *dev = nullptr;
    CHECK(aclrtMalloc(&dev, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    if (host != nullptr) {
        CHECK(aclrtMemcpy(dev, bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    }
    return dev;
}

int main(int argc, char **argv) {
    if (argc != 1 && argc != 4 && argc != 6 && argc != 9 && argc != 10) {
        std::fprintf(stderr, "usage: %s [M N K [SINGLE_M SINGLE_N [BASE_M BASE_N BASE_K [DIM]]]]\n",
                     argv[0]);
        return 2;
    }
    // The MatmulInvocationNeo sample's shape by default.
    const int32_t M = argc > 1 ? std::atoi(argv[1]) : 512;
    const int32_t N = argc > 1 ? std::atoi(argv[2]) : 1024;
    const int32_t K = argc > 1 ? std::atoi(argv[3]) : 512;

    // 1. The tiling, from the platform's figures.
    auto *platform = platform_ascendc::PlatformAscendCManager::GetInstance("Ascend910B3");
    using namespace matmul_tiling;
    MultiCoreMatmulTiling api(*platform);
    const int32_t dim = argc == 10 ? std::atoi(argv[9]) : -1;
    api.SetDim(dim > 0 ? dim : (int32_t)platform->GetCoreNumAiv());
    api.SetAType(TPosition::GM, CubeFormat::ND, DataType::DT_FLOAT16);
    api.SetBType(TPosition::GM, CubeFormat::ND, DataType::DT_FLOAT16);
    api.SetCType(TPosition::GM, CubeFormat::ND, DataType::DT_FLOAT);
    api.SetOrgShape(M, N, K);
    api.SetShape(M, N, K);
    if (argc >= 6) {
        api.SetSingleShape(std::atoi(argv[4]), std::atoi(argv[5]), -1);
    }
    if (argc >= 9) {
        api.SetFixSplit(std::atoi(argv[6]), std::atoi(argv[7]), std::atoi(argv[8]));
    }
    api.SetBias(false);
    api.SetBufferSpace(-1, -1, -1);
    optiling::TCubeTiling tilingData;
    if (api.GetTiling(tilingData) == -1) {
        std::printf("gen tiling failed\n");
        return 1;
    }
    std::vector<uint8_t> tilingBuf(tilingData.GetDataSize());
    tilingData.SaveToBuffer(tilingBuf.data(), tilingBuf.size());
    const TCubeTiling &t = tilingData.Data();
    std::printf("tiling: %d cores, single %d x %d x %d, base %d x %d x %d\n", t.usedCoreNum,
                t.singleCoreM, t.singleCoreN, t.singleCoreK, t.baseM, t.baseN, t.baseK);

    // 2. Inputs: multiples of 1/256 below 4 in magnitude, exact in half; their products are
    //    exact in float, their sums are not (so the order of the additions shows).
    std::vector<aclFloat16> a((size_t)M * K), b((size_t)K * N);
    uint32_t seed = 12345;
    auto next = [&seed]() {
        seed = seed * 1664525u + 1013904223u;
        return (float)((int32_t)((seed >> 8) % 2001) - 1000) / 256.0f;
    };
    for (auto &x : a) x = aclFloatToFloat16(next());
    for (auto &x : b) x = aclFloatToFloat16(next());

    // 3. The kernels: float C with IterateAll, half C block by block.
    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream = nullptr;
    CHECK(aclrtCreateStream(&stream));
    void *aDev = ToDevice(a.data(), a.size() * 2);
    void *bDev = ToDevice(b.data(), b.size() * 2);
    void *cDev = ToDevice(nullptr, (size_t)M * N * 4);
    void *hDev = ToDevice(nullptr, (size_t)M * N * 2);
    void *tDev = ToDevice(tilingBuf.data(), tilingBuf.size());
    uint32_t blockDim = (uint32_t)(t.usedCoreNum + 1) / 2;
    CHECK(ACLRT_LAUNCH_KERNEL(matmul_api)(blockDim, stream, aDev, bDev, cDev, tDev));
    CHECK(ACLRT_LAUNCH_KERNEL(matmul_api_iterate)(blockDim, stream, aDev, bDev, hDev, tDev));
    CHECK(aclrtSynchronizeStream(stream));
    std::vector<float> c((size_t)M * N);
    std::vector<aclFloat16> h((size_t)M * N);
    CHECK(aclrtMemcpy(c.data(), c.size() * 4, cDev, c.size() * 4, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(aclrtMemcpy(h.data(), h.size() * 2, hDev, h.size() * 2, ACL_MEMCPY_DEVICE_TO_HOST));

    // 4. The CPU in the cube's order.
    size_t wrong = 0, wrongHalf = 0;
    for (int32_t i = 0; i < M; i++) {
        for (int32_t j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int32_t k = 0; k < K; k++) {
                float p = aclFloat16ToFloat(a[(size_t)i * K + k]) * aclFloat16ToFloat(b[(size_t)k * N + j]);
                acc = acc + p;
            }
            float got = c[(size_t)i * N + j];
            if (std::memcmp(&got, &acc, 4) != 0) {
                if (wrong++ < 5) {
                    std::printf("C[%d][%d] = %.9g, want %.9g\n", i, j, got, acc);
                }
            }
            if (h[(size_t)i * N + j] != aclFloatToFloat16(acc)) {
                if (wrongHalf++ < 5) {
                    std::printf("half C[%d][%d] = %.9g, want %.9g\n", i, j,
                                aclFloat16ToFloat(h[(size_t)i * N + j]), acc);
                }
            }
        }
    }
    CHECK(aclrtFree(aDev));
    CHECK(aclrtFree(bDev));
    CHECK(aclrtFree(cDev));
    CHECK(aclrtFree(hDev));
    CHECK(aclrtFree(tDev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    if (wrong != 0 || wrongHalf != 0) {
        std::printf("matmul %d x %d x %d: %zu float and %zu half elements differ\n", M, N, K, wrong, wrongHalf);
        return 1;
    }
    std::printf("matmul %d x %d x %d on %u AI cores: float and half C bit for bit\n", M, N, K, blockDim);
    return 0;
}
