/*
 * npusim.h — the kernel SDK for the simulated NPU.
 *
 * A kernel is a freestanding C function compiled for the NPU's scalar core and loaded by the
 * runtime (`load_binary`). This header is the whole SDK: no libc, no startup code, no linker
 * script. It mirrors `device/src/abi.rs`; when the two disagree, abi.rs is right.
 *
 * Build (see scripts/build-kernels.sh):
 *
 *     clang --target=riscv64-unknown-elf -march=rv64imf -mabi=lp64f -O2 -ffreestanding \
 *           -fno-builtin -nostdlib -mcmodel=medany -mno-relax -fno-pic -c kernel.c
 *
 * ABI
 *
 *  - Entry points are ordinary C functions marked NPU_KERNEL. Arguments are passed by the
 *    RISC-V LP64F calling convention: integers and pointers in a0..a7, `float`s in fa0..fa7,
 *    the rest on the stack. There is no `double` hardware: the core is RV64IMF, so `double`
 *    arithmetic needs soft-float helpers that do not exist here; use `float`.
 *  - A block finishes by returning from its entry function (`ret`). The return value is ignored.
 *    A kernel reports an error with npu_abort(code), which faults the task with that code.
 *  - Every block of a launch runs the same entry function with the same arguments.
 *    npu_block_idx() is this block's index in 0..npu_block_dim(); blocks may run in any order
 *    and on any core (npu_core_id()), so a block must only write the part of the output its
 *    index owns.
 *  - Each block has its own 64 KiB stack in core-local memory. Globals and `static` variables
 *    live in the binary's module-data window and are shared by all blocks of all launches.
 *  - Memory accesses must be naturally aligned (a 4-byte load at a multiple of 4, ...): a
 *    misaligned access faults. Address 0 and everything below 64 KiB are never mapped, so a
 *    null dereference faults.
 *  - Integer division or remainder by zero traps on the NPU (unlike plain RISC-V, which
 *    returns all ones); so does `ebreak` and running past the instruction budget.
 *  - No compressed instructions (no 'C' extension) and no linker relaxation: do not add `c`
 *    to -march, and keep -mno-relax (the loader refuses R_RISCV_ALIGN).
 *  - Nothing may call libc: with -fno-builtin the compiler does not turn loops into memcpy /
 *    memset calls, but copying a large struct by value still can; use npu_copy_bytes.
 */
#ifndef NPUSIM_H
#define NPUSIM_H

#if !defined(__riscv) || __riscv_xlen != 64
#error "npusim.h is for the NPU's RV64 core: compile with --target=riscv64-unknown-elf"
#endif

/* Freestanding headers only: they come with the compiler, not with a libc. */
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a kernel entry point: a global, default-visibility function the loader exports by
 * name. `used` keeps it even when nothing in the file calls it. */
#ifdef __cplusplus
#define NPU_KERNEL extern "C" __attribute__((used, visibility("default")))
#else
#define NPU_KERNEL __attribute__((used, visibility("default")))
#endif

/* CSR numbers (abi.rs: CSR_BLOCK_IDX ...). Inline asm needs them as literals, hence strings. */
#define NPU_CSR_BLOCK_IDX "0xCC0"
#define NPU_CSR_BLOCK_DIM "0xCC1"
#define NPU_CSR_CORE_ID "0xCC2"
#define NPU_CSR_TILING "0xCC3"
#define NPU_CSR_CYCLE "0xC00"
#define NPU_CSR_CORE_KIND "0xCCB"
#define NPU_CSR_SUB_BLOCK_IDX "0xCCC"
#define NPU_CSR_SUB_BLOCK_NUM "0xCCD"
/* npu_core_kind(): the block runs every part of its kernel, or the cube (AIC) or a vector (AIV)
 * part of a split mix kernel (abi.rs: CORE_KIND_*). */
#define NPU_CORE_KIND_ANY 0
#define NPU_CORE_KIND_AIC 1
#define NPU_CORE_KIND_AIV 2

/* ecall service numbers, passed in a7 (abi.rs: ECALL_*). The wrappers below let an ecall
 * overwrite a0 (where a service would return a value) and assume it keeps every other
 * register, so they stay correct whichever way the core treats a0. */
#define NPU_ECALL_PRINT_STR 1
#define NPU_ECALL_PRINT_I64 2
#define NPU_ECALL_PRINT_F32 3
#define NPU_ECALL_ABORT 93

/* The index of the running block, in 0..npu_block_dim(). */
static inline uint64_t npu_block_idx(void) {
    uint64_t x;
    __asm__ volatile("csrr %0, " NPU_CSR_BLOCK_IDX : "=r"(x));
    return x;
}

/* The number of blocks of this launch (at least 1). */
static inline uint64_t npu_block_dim(void) {
    uint64_t x;
    __asm__ volatile("csrr %0, " NPU_CSR_BLOCK_DIM : "=r"(x));
    return x;
}

/* The id of the AI core running this block. */
static inline uint64_t npu_core_id(void) {
    uint64_t x;
    __asm__ volatile("csrr %0, " NPU_CSR_CORE_ID : "=r"(x));
    return x;
}

/* Which part of its kernel the block runs: NPU_CORE_KIND_ANY (all of it), or, for a kernel
 * declared a mix of cube and vector blocks, NPU_CORE_KIND_AIC or NPU_CORE_KIND_AIV. */
static inline uint64_t npu_core_kind(void) {
    uint64_t x;
    __asm__ volatile("csrr %0, " NPU_CSR_CORE_KIND : "=r"(x));
    return x;
}

/* A vector block's index among its AI core's vector blocks (0 otherwise). */
static inline uint64_t npu_sub_block_idx(void) {
    uint64_t x;
    __asm__ volatile("csrr %0, " NPU_CSR_SUB_BLOCK_IDX : "=r"(x));
    return x;
}

/* Vector blocks per AI core in this launch (1 unless the kernel is a split mix). */
static inline uint64_t npu_sub_block_num(void) {
    uint64_t x;
    __asm__ volatile("csrr %0, " NPU_CSR_SUB_BLOCK_NUM : "=r"(x));
    return x;
}

/* The launch's tiling words in device memory, or NULL when the launch has none. */
static inline const void *npu_tiling(void) {
    uint64_t x;
    __asm__ volatile("csrr %0, " NPU_CSR_TILING : "=r"(x));
    return (const void *)(uintptr_t)x;
}

/* Core cycles since the block started (the standard `cycle` counter). */
static inline uint64_t npu_cycles(void) {
    uint64_t x;
    __asm__ volatile("csrr %0, " NPU_CSR_CYCLE : "=r"(x));
    return x;
}

/* Length of a NUL-terminated string; here because there is no libc strlen. */
static inline size_t npu_strlen(const char *s) {
    size_t n = 0;
    while (s[n] != '\0') {
        n++;
    }
    return n;
}

/* Prints `len` bytes at `s` to the host log (no terminator needed). */
static inline void npu_print_bytes(const char *s, size_t len) {
    register uintptr_t a0 __asm__("a0") = (uintptr_t)s;
    register uint64_t a1 __asm__("a1") = len;
    register uint64_t a7 __asm__("a7") = NPU_ECALL_PRINT_STR;
    /* "memory": the host reads the string, so it must be in memory before the ecall. */
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a1), "r"(a7) : "memory");
}

/* Prints a NUL-terminated string to the host log. */
static inline void npu_print_str(const char *s) {
    npu_print_bytes(s, npu_strlen(s));
}

/* Prints a signed integer to the host log. */
static inline void npu_print_i64(int64_t v) {
    register int64_t a0 __asm__("a0") = v;
    register uint64_t a7 __asm__("a7") = NPU_ECALL_PRINT_I64;
    __asm__ volatile("ecall" : "+r"(a0) : "r"(a7) : "memory");
}

/* Prints a single-precision float to the host log. */
static inline void npu_print_f32(float v) {
    register float fa0 __asm__("fa0") = v;
    register uint64_t a7 __asm__("a7") = NPU_ECALL_PRINT_F32;
    __asm__ volatile("ecall" : : "f"(fa0), "r"(a7) : "a0", "memory");
}

/* Ends the task with a fault carrying `code`. Never returns. */
__attribute__((noreturn)) static inline void npu_abort(int code) {
    register int64_t a0 __asm__("a0") = code;
    register uint64_t a7 __asm__("a7") = NPU_ECALL_ABORT;
    __asm__ volatile("ecall" : : "r"(a0), "r"(a7) : "memory");
    /* The core never resumes after an abort; should it ever, fault rather than run on. */
    __builtin_trap();
}

/* Copies `n` bytes (no overlap). A plain byte loop, because there is no libc memcpy. */
static inline void npu_copy_bytes(void *dst, const void *src, size_t n) {
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    for (size_t i = 0; i < n; i++) {
        d[i] = s[i];
    }
}

/* Sets `n` bytes at `dst` to `value`. */
static inline void npu_fill_bytes(void *dst, unsigned char value, size_t n) {
    unsigned char *d = (unsigned char *)dst;
    for (size_t i = 0; i < n; i++) {
        d[i] = value;
    }
}

/* The half-open range [*begin, *end) of `n` items owned by this block when the items are split
 * into npu_block_dim() contiguous slices of nearly equal size (the first `n % dim` blocks get
 * one more). Blocks past the end get an empty range. */
static inline void npu_block_range(uint64_t n, uint64_t *begin, uint64_t *end) {
    uint64_t dim = npu_block_dim();
    uint64_t idx = npu_block_idx();
    /* dim is never 0 on the NPU, but a guard keeps a bad launch from trapping here. */
    if (dim == 0) {
        dim = 1;
    }
    uint64_t base = n / dim;
    uint64_t extra = n % dim;
    uint64_t b = idx * base + (idx < extra ? idx : extra);
    uint64_t len = base + (idx < extra ? 1 : 0);
    if (idx >= dim) {
        b = n;
        len = 0;
    }
    *begin = b;
    *end = b + len;
}

#ifdef __cplusplus
}
#endif

#endif /* NPUSIM_H */
