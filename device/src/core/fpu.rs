//! Single-precision arithmetic with RISC-V semantics: all five rounding modes, the accrued
//! exception flags, canonical NaNs, after-rounding tininess detection.
//!
//! The host FPU only rounds to nearest and reports no flags, so results are computed exactly
//! (or as an f64 plus the sign of the error) and then rounded here in integer arithmetic.
//! Addition, multiplication and fused multiply-add use f64: an f32 product is exact in f64 and
//! the error of an f64 sum is recovered exactly with TwoSum; the pair is turned into the f64
//! rounded *to odd*, which rounds to f32 correctly in any mode because f64 carries more than
//! 24 + 2 bits. Division and square root are done on integer significands with a sticky bit.
//! A fast path (round-to-nearest, normal result) uses the host conversion.

/// Invalid operation.
pub(crate) const NV: u8 = 0x10;
/// Divide by zero.
pub(crate) const DZ: u8 = 0x08;
/// Overflow.
pub(crate) const OF: u8 = 0x04;
/// Underflow.
pub(crate) const UF: u8 = 0x02;
/// Inexact.
pub(crate) const NX: u8 = 0x01;

/// The canonical quiet NaN every NaN-producing operation returns.
pub(crate) const CANONICAL_NAN: u32 = 0x7fc0_0000;

/// A static rounding mode (the dynamic one is resolved through `frm` before calling here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rm {
    /// Round to nearest, ties to even.
    Rne,
    /// Round towards zero.
    Rtz,
    /// Round down (towards -inf).
    Rdn,
    /// Round up (towards +inf).
    Rup,
    /// Round to nearest, ties to max magnitude.
    Rmm,
}

impl Rm {
    /// The mode for a 3-bit field value, `None` for the reserved values 5, 6, 7.
    pub(crate) fn from_bits(b: u8) -> Option<Rm> {
        Some(match b {
            0 => Rm::Rne,
            1 => Rm::Rtz,
            2 => Rm::Rdn,
            3 => Rm::Rup,
            4 => Rm::Rmm,
            _ => return None,
        })
    }
}

const SIGN: u32 = 0x8000_0000;
const EXP: u32 = 0x7f80_0000;
const FRAC: u32 = 0x007f_ffff;

pub(crate) fn is_nan(b: u32) -> bool {
    b & 0x7fff_ffff > EXP
}

pub(crate) fn is_snan(b: u32) -> bool {
    is_nan(b) && b & 0x0040_0000 == 0
}

fn is_inf(b: u32) -> bool {
    b & 0x7fff_ffff == EXP
}

fn is_zero(b: u32) -> bool {
    b & 0x7fff_ffff == 0
}

/// NaN result of an operation: canonical, NV if an input was signalling.
fn nan_result(inputs: &[u32], flags: &mut u8) -> u32 {
    if inputs.iter().any(|&b| is_snan(b)) {
        *flags |= NV;
    }
    CANONICAL_NAN
}

/// Rounds `sig * 2^exp` (`sig != 0`, exact, with any sticky information already OR-ed into
/// its low bit) to f32 in mode `rm`, raising NX/UF/OF.
fn round_pack(neg: bool, exp: i32, sig: u64, rm: Rm, flags: &mut u8) -> u32 {
    debug_assert!(sig != 0);
    let lz = sig.leading_zeros();
    let sig = sig << lz;
    // Weight of the leading bit.
    let e = exp - lz as i32 + 63;
    let round = |shift: u32| -> (u64, bool) {
        // Shifts beyond 127 keep nothing and leave the value below half an ulp, like 127 does.
        let s = shift.min(127);
        let wide = sig as u128;
        let kept = (wide >> s) as u64;
        let rem = wide & ((1u128 << s) - 1);
        let half = 1u128 << (s - 1);
        let inexact = rem != 0;
        let up = match rm {
            Rm::Rne => rem > half || (rem == half && kept & 1 == 1),
            Rm::Rtz => false,
            Rm::Rdn => neg && inexact,
            Rm::Rup => !neg && inexact,
            Rm::Rmm => rem >= half,
        };
        (kept + up as u64, inexact)
    };
    let sign = if neg { SIGN } else { 0 };
    if e >= -126 {
        let (kept, inexact) = round(40);
        // `kept` includes the hidden bit; a carry to 2^24 bumps the exponent field naturally.
        let biased = (e + 127) as u64;
        let bits = ((biased - 1) << 23) + kept;
        if bits >= EXP as u64 {
            *flags |= OF | NX;
            let to_inf = match rm {
                Rm::Rne | Rm::Rmm => true,
                Rm::Rtz => false,
                Rm::Rdn => neg,
                Rm::Rup => !neg,
            };
            return sign | if to_inf { EXP } else { 0x7f7f_ffff };
        }
        if inexact {
            *flags |= NX;
        }
        sign | bits as u32
    } else {
        // Below the normal range: fewer significand bits survive.
        let (kept, inexact) = round(40 + (-126 - e) as u32);
        if inexact {
            *flags |= NX;
            // Tininess is detected after rounding: tiny unless rounding to 24 bits with an
            // unbounded exponent would have reached the smallest normal.
            let tiny = e < -127 || round(40).0 != 1 << 24;
            if tiny {
                *flags |= UF;
            }
        }
        // A carry out of the subnormal significand lands on the smallest normal encoding.
        sign | kept as u32
    }
}

/// Rounds a finite f64, taken as exact, to f32.
fn round_f64(v: f64, rm: Rm, flags: &mut u8) -> u32 {
    if rm == Rm::Rne {
        let r = v as f32;
        let mag = r.to_bits() & 0x7fff_ffff;
        // Strictly above the smallest normal: no underflow question, and below infinity.
        if mag > 0x0080_0000 && mag < EXP {
            if r as f64 != v {
                *flags |= NX;
            }
            return r.to_bits();
        }
    }
    let bits = v.to_bits();
    let neg = bits >> 63 != 0;
    let bexp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    if bexp == 0 && frac == 0 {
        return if neg { SIGN } else { 0 };
    }
    let (sig, exp) = if bexp == 0 {
        (frac, -1074)
    } else {
        (frac | 1 << 52, bexp - 1075)
    };
    round_pack(neg, exp, sig, rm, flags)
}

/// Rounds the exact value `s + err` (only the sign of `err` is given) to f32: `s` is first
/// turned into the f64 rounded to odd, which then rounds correctly in any mode.
fn round_with_error(s: f64, err: f64, rm: Rm, flags: &mut u8) -> u32 {
    let mut v = s;
    if err != 0.0 && s.to_bits() & 1 == 0 {
        // Step one f64 ulp towards the exact value; the neighbour's last bit is odd.
        let b = s.to_bits();
        let away = (err > 0.0) == (s > 0.0);
        v = f64::from_bits(if away { b + 1 } else { b - 1 });
    }
    round_f64(v, rm, flags)
}

/// The rounding error of `a + b` given `s = fl(a + b)` (TwoSum, exact without overflow).
fn two_sum_err(a: f64, b: f64, s: f64) -> f64 {
    let bb = s - a;
    let aa = s - bb;
    (a - aa) + (b - bb)
}

/// The exact sum `p + c` of two f64 values that came from f32 operands (so TwoSum is exact),
/// rounded to f32. Handles infinities and the sign of an exact zero.
fn sum_to_f32(p: f64, c: f64, rm: Rm, flags: &mut u8) -> u32 {
    if p.is_infinite() && c.is_infinite() && p.is_sign_positive() != c.is_sign_positive() {
        *flags |= NV;
        return CANONICAL_NAN;
    }
    let s = p + c;
    if s.is_infinite() {
        return (s as f32).to_bits();
    }
    let err = two_sum_err(p, c, s);
    if s == 0.0 && err == 0.0 {
        // x + (-x) is +0 except when rounding down; the sum of two like-signed zeros keeps it.
        let both_pos_zero = p.to_bits() == 0 && c.to_bits() == 0;
        let both_neg_zero = p.to_bits() == 1 << 63 && c.to_bits() == 1 << 63;
        let neg = both_neg_zero || (rm == Rm::Rdn && !both_pos_zero);
        return if neg { SIGN } else { 0 };
    }
    round_with_error(s, err, rm, flags)
}

fn widen(b: u32) -> f64 {
    f32::from_bits(b) as f64
}

/// `a + b`.
pub(crate) fn add(a: u32, b: u32, rm: Rm, flags: &mut u8) -> u32 {
    if is_nan(a) || is_nan(b) {
        return nan_result(&[a, b], flags);
    }
    sum_to_f32(widen(a), widen(b), rm, flags)
}

/// `a * b`.
pub(crate) fn mul(a: u32, b: u32, rm: Rm, flags: &mut u8) -> u32 {
    if is_nan(a) || is_nan(b) {
        return nan_result(&[a, b], flags);
    }
    if (is_inf(a) && is_zero(b)) || (is_zero(a) && is_inf(b)) {
        *flags |= NV;
        return CANONICAL_NAN;
    }
    // Exact: 24 x 24 bits fit in f64's 53.
    let p = widen(a) * widen(b);
    if p.is_infinite() || p == 0.0 {
        return (p as f32).to_bits();
    }
    round_f64(p, rm, flags)
}

/// `±(a * b) ± c` in one rounding: `neg_prod` negates the product, `neg_add` the addend.
pub(crate) fn fma(
    a: u32,
    b: u32,
    c: u32,
    neg_prod: bool,
    neg_add: bool,
    rm: Rm,
    flags: &mut u8,
) -> u32 {
    let inf_times_zero = (is_inf(a) && is_zero(b)) || (is_zero(a) && is_inf(b));
    if is_nan(a) || is_nan(b) || is_nan(c) {
        // ∞ × 0 is invalid even when the addend is a quiet NaN.
        if inf_times_zero {
            *flags |= NV;
        }
        return nan_result(&[a, b, c], flags);
    }
    if inf_times_zero {
        *flags |= NV;
        return CANONICAL_NAN;
    }
    let p = widen(a) * widen(b);
    let p = if neg_prod { -p } else { p };
    let c = if neg_add { -widen(c) } else { widen(c) };
    sum_to_f32(p, c, rm, flags)
}

/// Splits a finite nonzero f32 into `(negative, significand, exponent)` with the significand
/// normalized to `[2^23, 2^24)`.
fn unpack(b: u32) -> (bool, u64, i32) {
    let neg = b & SIGN != 0;
    let bexp = ((b & EXP) >> 23) as i32;
    let frac = (b & FRAC) as u64;
    let (mut sig, mut exp) = if bexp == 0 {
        (frac, -149)
    } else {
        (frac | 1 << 23, bexp - 150)
    };
    while sig < 1 << 23 {
        sig <<= 1;
        exp -= 1;
    }
    (neg, sig, exp)
}

/// `a / b`.
pub(crate) fn div(a: u32, b: u32, rm: Rm, flags: &mut u8) -> u32 {
    if is_nan(a) || is_nan(b) {
        return nan_result(&[a, b], flags);
    }
    let sign = (a ^ b) & SIGN;
    if (is_zero(a) && is_zero(b)) || (is_inf(a) && is_inf(b)) {
        *flags |= NV;
        return CANONICAL_NAN;
    }
    if is_inf(a) {
        return sign | EXP;
    }
    if is_zero(b) {
        *flags |= DZ;
        return sign | EXP;
    }
    if is_zero(a) || is_inf(b) {
        return sign;
    }
    let (_, ma, ea) = unpack(a);
    let (_, mb, eb) = unpack(b);
    // At least 40 quotient bits, the remainder becomes the sticky bit.
    let num = ma << 40;
    let q = num / mb;
    let sticky = (num % mb != 0) as u64;
    round_pack(sign != 0, ea - eb - 41, (q << 1) | sticky, rm, flags)
}

/// `sqrt(a)`.
pub(crate) fn sqrt(a: u32, rm: Rm, flags: &mut u8) -> u32 {
    if is_nan(a) {
        return nan_result(&[a], flags);
    }
    if is_zero(a) {
        return a; // sqrt(-0) = -0
    }
    if a & SIGN != 0 {
        *flags |= NV;
        return CANONICAL_NAN;
    }
    if is_inf(a) {
        return a;
    }
    let (_, mut m, mut e) = unpack(a);
    if e & 1 != 0 {
        m <<= 1;
        e -= 1;
    }
    // sqrt(m * 2^60) = sqrt(m) * 2^30 has over 40 bits; the remainder is the sticky bit.
    let wide = (m as u128) << 60;
    let root = wide.isqrt();
    let sticky = (root * root != wide) as u64;
    round_pack(
        false,
        e / 2 - 30 - 1,
        ((root as u64) << 1) | sticky,
        rm,
        flags,
    )
}

/// FMIN.S / FMAX.S per the F extension 2.2: a single NaN operand is ignored, -0 < +0.
pub(crate) fn min_max(a: u32, b: u32, max: bool, flags: &mut u8) -> u32 {
    if is_snan(a) || is_snan(b) {
        *flags |= NV;
    }
    match (is_nan(a), is_nan(b)) {
        (true, true) => return CANONICAL_NAN,
        (true, false) => return b,
        (false, true) => return a,
        _ => {}
    }
    let (fa, fb) = (f32::from_bits(a), f32::from_bits(b));
    if fa == fb {
        // Equal values differ at most in the sign of zero.
        return if max { a & b } else { a | b };
    }
    if (fa < fb) != max { a } else { b }
}

/// FEQ.S (quiet), FLT.S and FLE.S (signalling): 0 whenever an operand is NaN.
pub(crate) fn compare(a: u32, b: u32, kind: Cmp, flags: &mut u8) -> u64 {
    if is_nan(a) || is_nan(b) {
        let signalling = kind != Cmp::Eq || is_snan(a) || is_snan(b);
        if signalling {
            *flags |= NV;
        }
        return 0;
    }
    let (fa, fb) = (f32::from_bits(a), f32::from_bits(b));
    (match kind {
        Cmp::Eq => fa == fb,
        Cmp::Lt => fa < fb,
        Cmp::Le => fa <= fb,
    }) as u64
}

/// The comparison of [`compare`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Lt,
    Le,
}

/// FCLASS.S: a one-hot 10-bit mask.
pub(crate) fn classify(b: u32) -> u64 {
    let neg = b & SIGN != 0;
    let bit = if is_inf(b) {
        if neg { 0 } else { 7 }
    } else if is_nan(b) {
        if is_snan(b) { 8 } else { 9 }
    } else if is_zero(b) {
        if neg { 3 } else { 4 }
    } else if b & EXP == 0 {
        if neg { 2 } else { 5 }
    } else if neg {
        1
    } else {
        6
    };
    1 << bit
}

/// The integer width and signedness of an FCVT to or from an integer register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IntKind {
    W,
    Wu,
    L,
    Lu,
}

/// FCVT.{W,WU,L,LU}.S: rounds in `rm`, saturates out-of-range values and NaN (to the largest
/// value) with NV. Returns the destination register value (32-bit results sign-extended).
pub(crate) fn to_int(b: u32, kind: IntKind, rm: Rm, flags: &mut u8) -> u64 {
    let (lo, hi_excl, min_v, max_v): (f64, f64, u64, u64) = match kind {
        IntKind::W => (
            -2147483648.0,
            2147483648.0,
            i32::MIN as i64 as u64,
            i32::MAX as u64,
        ),
        IntKind::Wu => (0.0, 4294967296.0, 0, u64::MAX), // u32::MAX sign-extended
        IntKind::L => (
            -9223372036854775808.0,
            9223372036854775808.0,
            i64::MIN as u64,
            i64::MAX as u64,
        ),
        IntKind::Lu => (0.0, 18446744073709551616.0, 0, u64::MAX),
    };
    if is_nan(b) {
        *flags |= NV;
        return max_v;
    }
    let v = widen(b);
    let r = match rm {
        Rm::Rne => v.round_ties_even(),
        Rm::Rtz => v.trunc(),
        Rm::Rdn => v.floor(),
        Rm::Rup => v.ceil(),
        Rm::Rmm => v.round(),
    };
    if r < lo {
        *flags |= NV;
        return min_v;
    }
    if r >= hi_excl {
        *flags |= NV;
        return max_v;
    }
    if r != v {
        *flags |= NX;
    }
    match kind {
        IntKind::W => r as i32 as i64 as u64,
        IntKind::Wu => r as u32 as i32 as i64 as u64,
        IntKind::L => r as i64 as u64,
        IntKind::Lu => r as u64,
    }
}

/// FCVT.S.{W,WU,L,LU}: `x` is the source register; only the low 32 bits count for W/WU.
pub(crate) fn from_int(x: u64, kind: IntKind, rm: Rm, flags: &mut u8) -> u32 {
    let (neg, mag) = match kind {
        IntKind::W => {
            let v = x as i32;
            (v < 0, v.unsigned_abs() as u64)
        }
        IntKind::Wu => (false, x as u32 as u64),
        IntKind::L => {
            let v = x as i64;
            (v < 0, v.unsigned_abs())
        }
        IntKind::Lu => (false, x),
    };
    if mag == 0 {
        return 0;
    }
    round_pack(neg, 0, mag, rm, flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: f32) -> u32 {
        v.to_bits()
    }

    #[test]
    fn add_rounds_in_every_mode() {
        // 1 + 2^-24 is exactly halfway between 1 and 1 + 2^-23.
        let a = f(1.0);
        let b = f(2f32.powi(-24));
        let mut fl = 0;
        assert_eq!(add(a, b, Rm::Rne, &mut fl), f(1.0));
        assert_eq!(fl, NX);
        assert_eq!(add(a, b, Rm::Rup, &mut fl), f(1.0) + 1);
        assert_eq!(add(a, b, Rm::Rmm, &mut fl), f(1.0) + 1);
        assert_eq!(add(a, b, Rm::Rtz, &mut fl), f(1.0));
        // A tiny negative addend: RTZ and RDN go below 1.0 (into the finer binade).
        let tiny = f(-1e-30);
        assert_eq!(add(a, tiny, Rm::Rtz, &mut fl), f(1.0) - 1);
        assert_eq!(add(a, tiny, Rm::Rdn, &mut fl), f(1.0) - 1);
        assert_eq!(add(a, tiny, Rm::Rne, &mut fl), f(1.0));
        assert_eq!(add(a, tiny, Rm::Rup, &mut fl), f(1.0));
    }

    #[test]
    fn exact_cancellation_is_negative_zero_only_rounding_down() {
        let mut fl = 0;
        assert_eq!(add(f(1.5), f(-1.5), Rm::Rne, &mut fl), 0);
        assert_eq!(add(f(1.5), f(-1.5), Rm::Rdn, &mut fl), SIGN);
        assert_eq!(add(f(-0.0), f(-0.0), Rm::Rne, &mut fl), SIGN);
        assert_eq!(add(f(0.0), f(0.0), Rm::Rdn, &mut fl), 0);
        assert_eq!(fl, 0);
    }

    #[test]
    fn overflow_depends_on_rounding_direction() {
        let mut fl = 0;
        assert_eq!(mul(f(f32::MAX), f(2.0), Rm::Rne, &mut fl), f(f32::INFINITY));
        assert_eq!(fl, OF | NX);
        assert_eq!(mul(f(f32::MAX), f(2.0), Rm::Rtz, &mut fl), f(f32::MAX));
        assert_eq!(mul(f(-f32::MAX), f(2.0), Rm::Rup, &mut fl), f(-f32::MAX));
        assert_eq!(
            mul(f(-f32::MAX), f(2.0), Rm::Rdn, &mut fl),
            f(f32::NEG_INFINITY)
        );
    }

    #[test]
    fn underflow_is_detected_after_rounding() {
        let mut fl = 0;
        // Smallest subnormal / 2 rounds to zero (ties to even): tiny and inexact.
        let min_sub = 1u32;
        assert_eq!(mul(min_sub, f(0.5), Rm::Rne, &mut fl), 0);
        assert_eq!(fl, UF | NX);
        // An exact subnormal result raises nothing.
        fl = 0;
        assert_eq!(mul(2, f(0.5), Rm::Rne, &mut fl), 1);
        assert_eq!(fl, 0);
        // 2^-126 (1 - 2^-26) rounds to 2^-126 even at 24 bits with an unbounded exponent:
        // not tiny, so only inexact.
        let a = f(1.0 - 2f32.powi(-13));
        let b = f((1.0 + 2f32.powi(-13)) * f32::MIN_POSITIVE);
        fl = 0;
        assert_eq!(mul(a, b, Rm::Rne, &mut fl), f(f32::MIN_POSITIVE));
        assert_eq!(fl, NX);
        // Rounded towards zero it stays subnormal: tiny.
        fl = 0;
        assert_eq!(mul(a, b, Rm::Rtz, &mut fl), f(f32::MIN_POSITIVE) - 1);
        assert_eq!(fl, UF | NX);
        // 2^-126 - 2^-150 is exact at 24 bits (tiny) but rounds up to 2^-126 at subnormal
        // precision: the result is normal and UF is still raised.
        fl = 0;
        let r = mul(
            f(1.0 - 2f32.powi(-24)),
            f(f32::MIN_POSITIVE),
            Rm::Rne,
            &mut fl,
        );
        assert_eq!(r, f(f32::MIN_POSITIVE));
        assert_eq!(fl, UF | NX);
    }

    #[test]
    fn div_and_sqrt_are_correctly_rounded() {
        let mut fl = 0;
        assert_eq!(div(f(1.0), f(3.0), Rm::Rne, &mut fl), f(1.0 / 3.0));
        assert_eq!(fl, NX);
        assert_eq!(div(f(1.0), f(3.0), Rm::Rtz, &mut fl), f(1.0 / 3.0) - 1);
        fl = 0;
        assert_eq!(div(f(6.0), f(3.0), Rm::Rne, &mut fl), f(2.0));
        assert_eq!(fl, 0);
        assert_eq!(div(f(1.0), f(0.0), Rm::Rne, &mut fl), f(f32::INFINITY));
        assert_eq!(fl, DZ);
        fl = 0;
        assert_eq!(sqrt(f(2.0), Rm::Rne, &mut fl), f(2f32.sqrt()));
        assert_eq!(fl, NX);
        fl = 0;
        assert_eq!(sqrt(f(-1.0), Rm::Rne, &mut fl), CANONICAL_NAN);
        assert_eq!(fl, NV);
        assert_eq!(sqrt(f(-0.0), Rm::Rne, &mut fl), SIGN);
        // Subnormal inputs.
        fl = 0;
        assert_eq!(sqrt(1, Rm::Rne, &mut fl), f(f32::from_bits(1).sqrt()));
    }

    #[test]
    fn host_agrees_in_round_to_nearest() {
        // A deterministic sweep of bit patterns: the host is correct for RNE results.
        let mut s = 0x1234_5678_9abc_def0u64;
        for _ in 0..20_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let (a, b, c) = (s as u32, (s >> 32) as u32, (s >> 16) as u32);
            let (fa, fb, fc) = (f32::from_bits(a), f32::from_bits(b), f32::from_bits(c));
            let mut fl = 0;
            let check = |got: u32, want: f32| {
                if want.is_nan() {
                    assert_eq!(got, CANONICAL_NAN);
                } else {
                    assert_eq!(got, want.to_bits(), "{fa:e} {fb:e} {fc:e}");
                }
            };
            check(add(a, b, Rm::Rne, &mut fl), fa + fb);
            check(mul(a, b, Rm::Rne, &mut fl), fa * fb);
            check(div(a, b, Rm::Rne, &mut fl), fa / fb);
            check(sqrt(a, Rm::Rne, &mut fl), fa.sqrt());
            check(
                fma(a, b, c, false, false, Rm::Rne, &mut fl),
                fa.mul_add(fb, fc),
            );
        }
    }

    /// Checks `r` against the rounding-mode definition, given `cmp(x)` = the order of the f32
    /// `x` relative to the exact result and `cmp_mid(lo, hi)` = the order of the midpoint of two
    /// adjacent f32s relative to it (both computed exactly in f64 by the caller).
    fn check_rounding(
        what: &str,
        r: u32,
        flags: u8,
        rm: Rm,
        cmp: impl Fn(f32) -> std::cmp::Ordering,
        cmp_mid: impl Fn(f32, f32) -> std::cmp::Ordering,
    ) {
        use std::cmp::Ordering::*;
        let got = f32::from_bits(r);
        assert!(!got.is_nan(), "{what}");
        // The two f32 neighbours bracketing the exact value.
        let (lo, hi) = match cmp(got) {
            Equal => {
                assert_eq!(flags & NX, 0, "{what}: exact result flagged inexact");
                return;
            }
            Less => (got, got.next_up()),
            Greater => (got.next_down(), got),
        };
        assert_eq!(
            cmp(lo),
            Less,
            "{what}: {got:e} is not a neighbour of the exact value"
        );
        assert_eq!(
            cmp(hi),
            Greater,
            "{what}: {got:e} is not a neighbour of the exact value"
        );
        assert_ne!(flags & NX, 0, "{what}: inexact result not flagged");
        let neg = lo < 0.0 || hi <= 0.0 && lo.is_sign_negative();
        let toward_zero = if neg { hi } else { lo };
        let away = if neg { lo } else { hi };
        let want = match rm {
            Rm::Rdn => lo,
            Rm::Rup => hi,
            Rm::Rtz => toward_zero,
            Rm::Rne | Rm::Rmm => match cmp_mid(lo, hi) {
                Greater => lo, // midpoint above the exact value
                Less => hi,
                Equal if rm == Rm::Rmm => away,
                Equal => {
                    if lo.to_bits() & 1 == 0 {
                        lo
                    } else {
                        hi
                    }
                }
            },
        };
        // Infinite neighbours stand for overflow; the finite-vs-infinite choice is checked too.
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{what} in {rm:?}: want {want:e}"
        );
    }

    /// An f32 as f64, with infinity standing for 2^128 (the next value above the largest
    /// finite one if the exponent were unbounded), as overflow rounding treats it.
    fn fin(x: f32) -> f64 {
        if x.is_infinite() {
            2f64.powi(128).copysign(x as f64)
        } else {
            x as f64
        }
    }

    #[test]
    fn directed_rounding_matches_an_exact_oracle() {
        let mut s = 0x0dd_ba11_cafe_f00du64;
        let modes = [Rm::Rne, Rm::Rtz, Rm::Rdn, Rm::Rup, Rm::Rmm];
        for i in 0..30_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Bias exponents towards the interesting ends now and then.
            let (mut a, mut b) = (s as u32, (s >> 32) as u32);
            if i % 4 == 0 {
                a = (a & 0x807f_ffff) | ((a >> 8) % 40) << 23; // tiny
            }
            if i % 7 == 0 {
                b = (b & 0x807f_ffff) | (0xb0 + (b >> 9) % 0x4f) << 23; // large
            }
            let (fa, fb) = (f32::from_bits(a), f32::from_bits(b));
            if !fa.is_finite() || !fb.is_finite() {
                continue;
            }
            let (xa, xb) = (fa as f64, fb as f64);
            for rm in modes {
                // Product: exact in f64, as are midpoints (25 bits).
                let mut fl = 0;
                let r = mul(a, b, rm, &mut fl);
                let p = xa * xb;
                let mid = |lo: f32, hi: f32| ((fin(lo) + fin(hi)) / 2.0).total_cmp(&p);
                check_rounding(
                    &format!("{fa:e} * {fb:e}"),
                    r,
                    fl,
                    rm,
                    |x| (x as f64).total_cmp(&p),
                    mid,
                );

                // Sum and fused multiply-add: the exact value is the pair s + e (TwoSum);
                // x - s is exact (Sterbenz) when x is within a factor of two of s.
                let c = f32::from_bits((s >> 16) as u32);
                if c.is_finite() {
                    let (mut fl_add, mut fl_fma) = (0, 0);
                    let sum_cases = [
                        (
                            "add",
                            add(a, c.to_bits(), rm, &mut fl_add),
                            fl_add,
                            xa,
                            c as f64,
                        ),
                        (
                            "fma",
                            fma(a, b, c.to_bits(), false, false, rm, &mut fl_fma),
                            fl_fma,
                            xa * xb,
                            c as f64,
                        ),
                    ];
                    for (name, r, fl, p, q) in sum_cases {
                        let s2 = p + q;
                        let e = two_sum_err(p, q, s2);
                        let order = |x: f64| {
                            if s2 == 0.0 {
                                return x.total_cmp(&0.0);
                            }
                            if !(x / s2 >= 0.5 && x / s2 <= 2.0) {
                                return x.partial_cmp(&s2).unwrap_or(std::cmp::Ordering::Equal);
                            }
                            (x - s2).total_cmp(&e)
                        };
                        if s2.is_infinite() || (s2 == 0.0 && e == 0.0) {
                            continue;
                        }
                        let mid = |lo: f32, hi: f32| order((fin(lo) + fin(hi)) / 2.0);
                        let cmp = |x: f32| {
                            if x.is_infinite() {
                                (x as f64).total_cmp(&s2)
                            } else {
                                order(x as f64)
                            }
                        };
                        check_rounding(&format!("{name} {fa:e} {fb:e} {c:e}"), r, fl, rm, cmp, mid);
                    }
                }

                // Quotient: compare x with a / b as x * b with a (exact products).
                if fb != 0.0 {
                    let mut fl = 0;
                    let r = div(a, b, rm, &mut fl);
                    let order = |x: f64| {
                        let o = (x * xb).total_cmp(&xa);
                        if xb < 0.0 { o.reverse() } else { o }
                    };
                    let mid = |lo: f32, hi: f32| order((fin(lo) + fin(hi)) / 2.0);
                    // Zero compares equal regardless of sign here.
                    let cmp = |x: f32| {
                        if x == 0.0 {
                            order(0.0)
                        } else {
                            order(x as f64)
                        }
                    };
                    check_rounding(&format!("{fa:e} / {fb:e}"), r, fl, rm, cmp, mid);
                }

                // Square root: compare x with sqrt(a) as x * x with a.
                if fa > 0.0 {
                    let mut fl = 0;
                    let r = sqrt(a, rm, &mut fl);
                    let order = |x: f64| {
                        if x < 0.0 {
                            std::cmp::Ordering::Less
                        } else {
                            (x * x).total_cmp(&xa)
                        }
                    };
                    let mid = |lo: f32, hi: f32| order((fin(lo) + fin(hi)) / 2.0);
                    check_rounding(&format!("sqrt {fa:e}"), r, fl, rm, |x| order(x as f64), mid);
                }
            }
        }
    }

    #[test]
    fn conversions_saturate_and_flag() {
        let mut fl = 0;
        assert_eq!(
            to_int(f(f32::NAN), IntKind::W, Rm::Rne, &mut fl),
            i32::MAX as u64
        );
        assert_eq!(fl, NV);
        fl = 0;
        assert_eq!(
            to_int(f(-3e9), IntKind::W, Rm::Rne, &mut fl),
            i32::MIN as i64 as u64
        );
        assert_eq!(to_int(f(-1.0), IntKind::Wu, Rm::Rne, &mut fl), 0);
        assert_eq!(to_int(f(5e9), IntKind::Wu, Rm::Rne, &mut fl), u64::MAX);
        assert_eq!(fl, NV);
        fl = 0;
        assert_eq!(to_int(f(-0.5), IntKind::Wu, Rm::Rtz, &mut fl), 0);
        assert_eq!(fl, NX);
        fl = 0;
        assert_eq!(to_int(f(2.5), IntKind::L, Rm::Rne, &mut fl), 2);
        assert_eq!(to_int(f(2.5), IntKind::L, Rm::Rmm, &mut fl), 3);
        assert_eq!(
            to_int(f(-2.5), IntKind::L, Rm::Rdn, &mut fl),
            (-3i64) as u64
        );
        assert_eq!(
            to_int(f(3e9), IntKind::Wu, Rm::Rne, &mut fl),
            3_000_000_000u32 as i32 as i64 as u64
        );
        let mut fl = 0;
        assert_eq!(
            from_int(u64::MAX, IntKind::Lu, Rm::Rne, &mut fl),
            f(1.8446744e19)
        );
        assert_eq!(fl, NX);
        assert_eq!(
            from_int(u64::MAX, IntKind::Lu, Rm::Rtz, &mut fl),
            f(1.8446743e19)
        );
        assert_eq!(
            from_int((-7i64) as u64, IntKind::L, Rm::Rne, &mut fl),
            f(-7.0)
        );
        assert_eq!(from_int(0xffff_ffff, IntKind::W, Rm::Rne, &mut fl), f(-1.0));
    }

    #[test]
    fn min_max_follow_the_2_2_rules() {
        let mut fl = 0;
        assert_eq!(min_max(f(-0.0), f(0.0), false, &mut fl), f(-0.0));
        assert_eq!(min_max(f(-0.0), f(0.0), true, &mut fl), f(0.0));
        assert_eq!(min_max(CANONICAL_NAN, f(1.0), false, &mut fl), f(1.0));
        assert_eq!(fl, 0);
        assert_eq!(min_max(0x7f80_0001, f(1.0), true, &mut fl), f(1.0));
        assert_eq!(fl, NV);
        assert_eq!(
            min_max(CANONICAL_NAN, CANONICAL_NAN, true, &mut fl),
            CANONICAL_NAN
        );
    }

    #[test]
    fn classify_sets_one_bit() {
        assert_eq!(classify(f(f32::NEG_INFINITY)), 1);
        assert_eq!(classify(f(-1.0)), 2);
        assert_eq!(classify(0x8000_0001), 4);
        assert_eq!(classify(f(-0.0)), 8);
        assert_eq!(classify(f(0.0)), 16);
        assert_eq!(classify(1), 32);
        assert_eq!(classify(f(1.0)), 64);
        assert_eq!(classify(f(f32::INFINITY)), 128);
        assert_eq!(classify(0x7f80_0001), 256);
        assert_eq!(classify(CANONICAL_NAN), 512);
    }
}
