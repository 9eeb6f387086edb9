/*
 * tiling/platform/platform_ascendc.h — CANN's host-side platform API for tiling functions:
 * PlatformAscendCManager::GetInstance() and the figures of the AI core a tiling is computed
 * for (core counts, local buffer sizes), answered from npusim's device (device 0 of the
 * session, or before aclInit the preset NPUSIM_PRESET selects) through npusimPlatformValue.
 *
 * Offered: GetCoreNum, GetCoreNumAic, GetCoreNumAiv, GetCoreNumVector, GetCoreMemSize (UB, L1,
 * L0_A, L0_B, L0_C, L2, HBM, BT), GetSocVersion, CalcTschBlockDim, GetLibApiWorkSpaceSize. A method CANN has
 * and this header does not fails the host compile naming it.
 */
#ifndef NPUSIM_TILING_PLATFORM_ASCENDC_H
#define NPUSIM_TILING_PLATFORM_ASCENDC_H

#include <stdint.h>

#include "acl/acl.h"

#ifdef __cplusplus
extern "C" {
#endif
/* npusim extension: one figure of the device (the NPUSIM_PLATFORM_* items below). */
ACL_FUNC_VISIBILITY aclError npusimPlatformValue(uint32_t item, uint64_t *value);
#ifdef __cplusplus
}
#endif

#define NPUSIM_PLATFORM_AIC_CORES 0
#define NPUSIM_PLATFORM_AIV_CORES 1
#define NPUSIM_PLATFORM_UB_BYTES 2
#define NPUSIM_PLATFORM_L1_BYTES 3
#define NPUSIM_PLATFORM_L0A_BYTES 4
#define NPUSIM_PLATFORM_L0B_BYTES 5
#define NPUSIM_PLATFORM_L0C_BYTES 6
#define NPUSIM_PLATFORM_HBM_BYTES 7
#define NPUSIM_PLATFORM_L2_BYTES 8
#define NPUSIM_PLATFORM_BT_BYTES 9

#ifdef __cplusplus
namespace platform_ascendc {

enum class CoreMemType { L0_A = 0, L0_B = 1, L0_C = 2, L1 = 3, L2 = 4, UB = 5, HBM = 6, FB = 7, BT = 8, RESERVED };

/* npusim models one SoC family, the 910B (separated cube and vector cores). */
enum class SocVersion { ASCEND910 = 0, ASCEND910B, ASCEND310P, ASCEND310B, ASCEND910_93, RESERVED_VERSION = 99999 };

class PlatformAscendC {
public:
    /* The cores a kernel's blocks spread over: on the 910B, whose cube and vector cores are
     * separate, the vector cores (as CANN documents). */
    uint32_t GetCoreNum() const { return GetCoreNumAiv(); }
    uint32_t GetCoreNumAic() const { return (uint32_t)Value(NPUSIM_PLATFORM_AIC_CORES); }
    uint32_t GetCoreNumAiv() const { return (uint32_t)Value(NPUSIM_PLATFORM_AIV_CORES); }
    /* The independent vector cores beside the AI cores: CANN reports them on its inference
     * SoCs only and 0 on others, the 910B among them. */
    uint32_t GetCoreNumVector() const { return 0; }
    /* The bytes of one core's buffer of `mem` (0 for FB, which npusim does not model). */
    void GetCoreMemSize(const CoreMemType &mem, uint64_t &size) const {
        switch (mem) {
        case CoreMemType::UB: size = Value(NPUSIM_PLATFORM_UB_BYTES); break;
        case CoreMemType::L1: size = Value(NPUSIM_PLATFORM_L1_BYTES); break;
        case CoreMemType::L0_A: size = Value(NPUSIM_PLATFORM_L0A_BYTES); break;
        case CoreMemType::L0_B: size = Value(NPUSIM_PLATFORM_L0B_BYTES); break;
        case CoreMemType::L0_C: size = Value(NPUSIM_PLATFORM_L0C_BYTES); break;
        case CoreMemType::L2: size = Value(NPUSIM_PLATFORM_L2_BYTES); break;
        case CoreMemType::HBM: size = Value(NPUSIM_PLATFORM_HBM_BYTES); break;
        case CoreMemType::BT: size = Value(NPUSIM_PLATFORM_BT_BYTES); break;
        default: size = 0; break;
        }
    }
    SocVersion GetSocVersion() const { return SocVersion::ASCEND910B; }
    /* Blocks of a mix (cube + vector) kernel for the given cube and vector counts. */
    uint32_t CalcTschBlockDim(uint32_t sliceNum, uint32_t aicCoreNum, uint32_t aivCoreNum) const {
        if (aicCoreNum == 0 || aivCoreNum == 0 || aicCoreNum > aivCoreNum) {
            return sliceNum;
        }
        uint32_t ratio = aivCoreNum / aicCoreNum;
        return (sliceNum + ratio - 1) / ratio;
    }
    /* The system workspace CANN's kernels expect for the Ascend C library (16 MiB on the
     * 910B); npusim's layer uses none of it, but a host program allocates it as on hardware. */
    uint32_t GetLibApiWorkSpaceSize() const { return 16u * 1024u * 1024u; }

private:
    static uint64_t Value(uint32_t item) {
        uint64_t v = 0;
        return npusimPlatformValue(item, &v) == ACL_SUCCESS ? v : 0;
    }
};

class PlatformAscendCManager {
public:
    /* The platform of the device the process runs on (the SoC name is taken and not checked:
     * npusim models its preset whatever the name). */
    static PlatformAscendC *GetInstance() {
        static PlatformAscendC platform;
        return &platform;
    }
    static PlatformAscendC *GetInstance(const char *customSocVersion) {
        (void)customSocVersion;
        return GetInstance();
    }
};

} // namespace platform_ascendc
#endif

#endif /* NPUSIM_TILING_PLATFORM_ASCENDC_H */
