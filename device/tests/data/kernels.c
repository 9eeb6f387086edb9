/* Small kernels for the scalar core's integration tests and benchmark. Compiled for the NPU
 * (rv64imf, lp64f) by build.sh into kernels.bin (flat text at abi::CODE_BASE) and
 * kernels.syms (entry addresses). The Rust tests check each against a Rust reference. */
#include <stdint.h>

/* An integer loop with adds, shifts, xors and a data-dependent branch: the MIPS benchmark. */
uint64_t scalar_loop(uint64_t n) {
    uint64_t a = 0, b = 1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t t = a + b;
        a = b;
        b = t ^ (i << 3) ^ (t >> 7);
        if (b & 1)
            a += i;
    }
    return a ^ b;
}

/* Sums an int32 array through the bus. */
int64_t sum_i32(const int32_t *p, int64_t n) {
    int64_t s = 0;
    for (int64_t i = 0; i < n; i++)
        s += p[i];
    return s;
}

/* A float dot product: loads through the bus, fused multiply-adds. */
float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Recursion: exercises the stack window (spills of ra/s-registers). */
int64_t fib(int64_t n) {
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

/* 12 mixed arguments, all in registers: stores what it received. */
void args12(int64_t *out, int a, float fa, int64_t b, float fb, unsigned c, float fc,
            int64_t d, float fd, int e, float fe, float ff) {
    out[0] = a;
    out[1] = b;
    out[2] = (int64_t)c;
    out[3] = d;
    out[4] = e;
    float *f = (float *)(out + 5);
    f[0] = fa;
    f[1] = fb;
    f[2] = fc;
    f[3] = fd;
    f[4] = fe;
    f[5] = ff;
}

/* 10 floats then 10 ints: fa0-fa7, then f8/f9 in a1/a2, ints in a3-a7, the rest on the stack. */
void spill20(int64_t *out, float f0, float f1, float f2, float f3, float f4, float f5, float f6,
             float f7, float f8, float f9, int64_t i0, int64_t i1, int64_t i2, int64_t i3,
             int i4, int64_t i5, int64_t i6, int i7, int64_t i8, int64_t i9) {
    float *f = (float *)out;
    f[0] = f0; f[1] = f1; f[2] = f2; f[3] = f3; f[4] = f4;
    f[5] = f5; f[6] = f6; f[7] = f7; f[8] = f8; f[9] = f9;
    out[5] = i0; out[6] = i1; out[7] = i2; out[8] = i3; out[9] = i4;
    out[10] = i5; out[11] = i6; out[12] = i7; out[13] = i8; out[14] = i9;
}

/* Reads the launch CSRs and prints through the ecall services (numbers from abi.rs). */
static void print_i64(int64_t v) {
    register int64_t a0 __asm__("a0") = v;
    register int64_t a7 __asm__("a7") = 2;
    __asm__ volatile("ecall" : : "r"(a0), "r"(a7) : "memory");
}
static void print_str(const char *s, int64_t len) {
    register const char *a0 __asm__("a0") = s;
    register int64_t a1 __asm__("a1") = len;
    register int64_t a7 __asm__("a7") = 1;
    __asm__ volatile("ecall" : : "r"(a0), "r"(a1), "r"(a7) : "memory");
}
int64_t hello(int64_t *out) {
    uint64_t idx, dim;
    __asm__ volatile("csrr %0, 0xcc0" : "=r"(idx));
    __asm__ volatile("csrr %0, 0xcc1" : "=r"(dim));
    volatile char msg[6];
    msg[0] = 'b'; msg[1] = 'l'; msg[2] = 'o'; msg[3] = 'c'; msg[4] = 'k'; msg[5] = ' ';
    print_str((const char *)msg, 6);
    print_i64((int64_t)idx);
    out[0] = idx;
    out[1] = dim;
    return (int64_t)(idx * 100 + dim);
}
