//! Native kernels every runtime starts with, registered by name. They compute real results in
//! simulated device memory and carry roofline cost functions, so examples both verify numbers
//! and show plausible timelines.
//!
//! | name | arguments | effect |
//! |---|---|---|
//! | `noop` | — | nothing (for measuring the runtime itself) |
//! | `fill_f32` | `x, n, value` | `x[i] = value` |
//! | `vector_add_f32` | `a, b, c, n` | `c[i] = a[i] + b[i]` |
//! | `vector_mul_f32` | `a, b, c, n` | `c[i] = a[i] * b[i]` |
//! | `axpy_f32` | `n, alpha, x, y` | `y[i] = alpha * x[i] + y[i]` |
//! | `relu_f32` | `x, y, n` | `y[i] = max(x[i], 0)` |
//! | `gemm_f32` | `a, b, c, m, n, k` | `C = A·B`, row-major `A: m×k`, `B: k×n`, `C: m×n` |
//! | `softmax_rows_f32` | `x, y, rows, cols` | `y` = softmax of each row of `x` |
//! | `fault_bad_address` | `ptr` | reads `ptr`: faults when it is not live memory of the context |
//! | `fault_div_zero` | `divisor` | integer division by `divisor`: traps when it is 0 |
//! | `fault_spin` | — | never finishes: the watchdog stops it (`ACL_ERROR_RT_AICORE_TIMEOUT`) |

mod builtin;

pub use builtin::register_builtins;
