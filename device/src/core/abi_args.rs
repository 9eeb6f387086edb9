//! Kernel arguments, placed per the RISC-V LP64F calling convention (psABI "hardware
//! floating-point calling convention", FLEN = 32):
//!
//! 1. integer and pointer arguments take `a0`–`a7` in order;
//! 2. `float` arguments take `fa0`–`fa7` in order; once those are used up, a `float` is passed
//!    like an integer (its bits in the next free `a` register, then on the stack);
//! 3. what does not fit in registers goes on the stack in 8-byte slots, the first at `sp`,
//!    with `sp` kept 16-byte aligned.
//!
//! 32-bit integers must arrive sign-extended to 64 bits — for `unsigned int` too, as the psABI
//! requires; [`KernelArg::i32`] and [`KernelArg::u32`] do that.

/// One argument of a kernel call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KernelArg {
    /// An integer or pointer, as the 64-bit register value the callee expects.
    Int(u64),
    /// A single-precision float.
    F32(f32),
}

impl KernelArg {
    /// A C `int` (sign-extended).
    pub fn i32(v: i32) -> KernelArg {
        KernelArg::Int(v as i64 as u64)
    }

    /// A C `unsigned int`: the psABI sign-extends bit 31 into the upper half too.
    pub fn u32(v: u32) -> KernelArg {
        KernelArg::Int(v as i32 as i64 as u64)
    }

    /// A C `long` / `int64_t`.
    pub fn i64(v: i64) -> KernelArg {
        KernelArg::Int(v as u64)
    }

    /// A device pointer.
    pub fn ptr(addr: u64) -> KernelArg {
        KernelArg::Int(addr)
    }
}

/// Where each argument goes: register values and the stack words, in order.
#[derive(Debug, Default)]
pub(crate) struct Placement {
    /// Values for `a0..a(n-1)`.
    pub int_regs: smallvec::SmallVec<[u64; 8]>,
    /// NaN-boxed values for `fa0..fa(n-1)`.
    pub float_regs: smallvec::SmallVec<[u64; 8]>,
    /// Stack slots from `sp` upwards.
    pub stack: smallvec::SmallVec<[u64; 8]>,
}

/// Number of integer (and of float) argument registers.
const ARG_REGS: usize = 8;

/// Assigns each argument to a register or a stack slot.
pub(crate) fn place(args: &[KernelArg]) -> Placement {
    let mut p = Placement::default();
    for arg in args {
        match *arg {
            KernelArg::Int(v) => {
                if p.int_regs.len() < ARG_REGS {
                    p.int_regs.push(v);
                } else {
                    p.stack.push(v);
                }
            }
            KernelArg::F32(f) => {
                let bits = f.to_bits() as u64;
                if p.float_regs.len() < ARG_REGS {
                    p.float_regs.push(0xffff_ffff_0000_0000 | bits);
                } else if p.int_regs.len() < ARG_REGS {
                    // Upper bits are unspecified by the psABI; zero keeps runs deterministic.
                    p.int_regs.push(bits);
                } else {
                    p.stack.push(bits);
                }
            }
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_spill_to_integer_registers_then_the_stack() {
        let mut args = vec![KernelArg::F32(1.0); 10];
        args.extend((0..8).map(KernelArg::Int));
        let p = place(&args);
        assert_eq!(p.float_regs.len(), 8);
        assert_eq!(p.int_regs[0], 1f32.to_bits() as u64);
        assert_eq!(p.int_regs[1], 1f32.to_bits() as u64);
        assert_eq!(&p.int_regs[2..], &[0, 1, 2, 3, 4, 5]);
        assert_eq!(&p.stack[..], &[6, 7]);
    }

    #[test]
    fn unsigned_ints_are_sign_extended() {
        assert_eq!(
            KernelArg::u32(0x8000_0000),
            KernelArg::Int(0xffff_ffff_8000_0000)
        );
        assert_eq!(KernelArg::i32(-1), KernelArg::Int(u64::MAX));
    }
}
