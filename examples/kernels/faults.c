/*
 * faults.c — kernels that fail on purpose, to test how the NPU and the runtime report faults.
 * Each one faults its task; the context then carries a sticky error (DESIGN.md §7).
 */
#include "npusim.h"

/*
 * null_deref(): loads from address 0, which is never mapped: a page fault.
 * No arguments.
 */
NPU_KERNEL void null_deref(void) {
    /* volatile so the compiler keeps the load instead of treating it as unreachable. */
    volatile int32_t *p = (volatile int32_t *)(uintptr_t)0;
    npu_print_i64(*p);
}

/*
 * div_zero(divisor): prints 1000 / divisor. With divisor == 0 the integer divide traps.
 *   a0 divisor: int32_t
 */
NPU_KERNEL void div_zero(int32_t divisor) {
    npu_print_i64(1000 / divisor);
}

/*
 * spin_forever(): loops forever, until the instruction budget fault stops it.
 * No arguments.
 */
NPU_KERNEL void spin_forever(void) {
    /* A volatile counter, so the loop has a side effect and is not optimised away. */
    volatile uint64_t spins = 0;
    for (;;) {
        spins = spins + 1;
    }
}

/*
 * call_abort(code): prints a message, then aborts: the task faults with `code`.
 *   a0 code: int32_t
 */
NPU_KERNEL void call_abort(int32_t code) {
    npu_print_str("call_abort: giving up on purpose");
    npu_abort(code);
}
