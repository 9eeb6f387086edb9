/*
 * tiling/platform/platform_ascendc.h — CANN's host-side platform API for Ascend C tiling code,
 * on npusim: platform_ascendc::PlatformAscendCManager::GetInstance(socVersion) and the
 * PlatformAscendC figures a tiling function reads (core counts, per-core buffer sizes, the
 * library workspace). The figures are npusim's device preset (npusimGetPlatformInfo in
 * libnpusim_acl: the 910B preset unless NPUSIM_PRESET says otherwise), never the SoC string's:
 * the string only names the SocVersion reported back. Header-only.
 */
#ifndef NPUSIM_PLATFORM_ASCENDC_H
#define NPUSIM_PLATFORM_ASCENDC_H
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "acl/acl.h"

namespace platform_ascendc {

/* The local memories GetCoreMemSize reports. */
enum class CoreMemType { L0_A = 0, L0_B = 1, L0_C = 2, L1 = 3, L2 = 4, UB = 5, HBM = 6, RESERVED };

/* The SoC families CANN names. */
enum class SocVersion { ASCEND910 = 0, ASCEND910B, ASCEND310P, ASCEND310B, ASCEND910_93, RESERVED_VERSION = 99999 };

/* One device's figures, as CANN's PlatformAscendC reports them. */
class PlatformAscendC {
public:
    explicit PlatformAscendC(const char *socVersion) : soc_(Family(socVersion)) {
        if (npusimGetPlatformInfo(&info_) != ACL_SUCCESS) {
            std::fprintf(stderr, "platform_ascendc: npusimGetPlatformInfo failed (NPUSIM_PRESET?)\n");
            std::abort();
        }
    }
    /* The cores a vector kernel's blockDim counts: the AIV cores where the device has them. */
    uint32_t GetCoreNum() const { return GetCoreNumAiv(); }
    uint32_t GetCoreNumAic() const { return info_.aiCores; }
    uint32_t GetCoreNumAiv() const { return info_.vectorCores; }
    uint32_t GetCoreNumVector() const { return 0; }
    SocVersion GetSocVersion() const { return soc_; }
    void GetCoreMemSize(const CoreMemType &memType, uint64_t &size) const {
        switch (memType) {
        case CoreMemType::L0_A: size = info_.l0aBytes; break;
        case CoreMemType::L0_B: size = info_.l0bBytes; break;
        case CoreMemType::L0_C: size = info_.l0cBytes; break;
        case CoreMemType::L1: size = info_.l1Bytes; break;
        case CoreMemType::L2: size = info_.l2Bytes; break;
        case CoreMemType::UB: size = info_.ubBytes; break;
        case CoreMemType::HBM: size = info_.hbmBytes; break;
        default: size = 0; break;
        }
    }
    /* The system workspace the high-level APIs take from a kernel's workspace argument:
     * npusim's Matmul needs none (its cube and vector parts share one program), so 0. */
    uint32_t GetLibApiWorkSpaceSize() const { return 0; }
    /* Blocks of a mix (cube + vector) kernel for the given cube and vector counts. */
    uint32_t CalcTschBlockDim(uint32_t sliceNum, uint32_t aicCoreNum, uint32_t aivCoreNum) const {
        if (aicCoreNum == 0 || aivCoreNum == 0 || aicCoreNum > aivCoreNum) {
            return sliceNum;
        }
        uint32_t ratio = aivCoreNum / aicCoreNum;
        return (sliceNum + ratio - 1) / ratio;
    }
    /* The npusim preset's figures behind the answers above. */
    const npusimPlatformInfo &Info() const { return info_; }

private:
    static SocVersion Family(const char *s) {
        if (s == nullptr || *s == '\0') {
            return SocVersion::ASCEND910B;
        }
        if (std::strncmp(s, "Ascend910_93", 12) == 0) {
            return SocVersion::ASCEND910_93;
        }
        if (std::strncmp(s, "Ascend910B", 10) == 0) {
            return SocVersion::ASCEND910B;
        }
        if (std::strncmp(s, "Ascend910", 9) == 0) {
            return SocVersion::ASCEND910;
        }
        if (std::strncmp(s, "Ascend310P", 10) == 0) {
            return SocVersion::ASCEND310P;
        }
        if (std::strncmp(s, "Ascend310B", 10) == 0) {
            return SocVersion::ASCEND310B;
        }
        return SocVersion::RESERVED_VERSION;
    }
    SocVersion soc_;
    npusimPlatformInfo info_{};
};

/* One PlatformAscendC per process, made on first use. */
class PlatformAscendCManager {
public:
    static PlatformAscendC *GetInstance() { return GetInstance(nullptr); }
    static PlatformAscendC *GetInstance(const char *customSocVersion) {
        static PlatformAscendC platform(customSocVersion);
        return &platform;
    }
};

} // namespace platform_ascendc
#endif
