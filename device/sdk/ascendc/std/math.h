// <math.h> for Ascend C kernels on npusim's AI core: <cmath>'s float functions under their C
// names (sqrtf, expf, logf, ...) in the global namespace.
#ifndef NPUSIM_MATH_H
#define NPUSIM_MATH_H
#include <cmath>
using std::ceilf;
using std::copysignf;
using std::exp2f;
using std::expf;
using std::fabsf;
using std::floorf;
using std::fmaf;
using std::fmaxf;
using std::fminf;
using std::log10f;
using std::log2f;
using std::logf;
using std::powf;
using std::rintf;
using std::roundf;
using std::sqrtf;
using std::truncf;
#endif
