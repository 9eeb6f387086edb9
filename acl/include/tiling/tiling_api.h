/*
 * tiling/tiling_api.h — CANN's host tiling API, as far as npusim offers it: the platform
 * queries (tiling/platform/platform_ascendc.h). The matmul tiling classes (matmul_tiling::
 * MultiCoreMatmulTiling, ...) and the advanced APIs' tiling functions (PadTilingFunc, ...) are
 * not offered: a host file that uses them fails to compile naming them.
 */
#ifndef NPUSIM_TILING_TILING_API_H
#define NPUSIM_TILING_TILING_API_H

#include "tiling/platform/platform_ascendc.h"

#endif /* NPUSIM_TILING_TILING_API_H */
