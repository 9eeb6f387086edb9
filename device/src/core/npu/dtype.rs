//! Element types of the vector unit and the rounding of casts between them.
//!
//! Every value of every type is exactly representable as an `f64`, so a cast is: read the
//! source element exactly into an `f64`, round it once to the destination type with the
//! requested [`RoundMode`], store it. Rounding is done on the exact value (scale by a power of
//! two so the destination's last significand bit is the units digit, round that to an integer,
//! scale back), so every mode gives the IEEE result with a single rounding — no host
//! floating-point environment and no double rounding involved.
//!
//! The f16 arithmetic of the element-wise instructions is exact IEEE binary16 for the same
//! reason: `+ − × ÷ √` of two f16 values computed in f32 and rounded once to f16 is the
//! correctly rounded f16 result (f32's 24-bit significand is at least `2·11 + 2` bits, so the
//! intermediate rounding is innocuous).

use super::f16::{f16_to_f32, f32_to_f16};

/// An element type of the vector unit: bits 32..36 of a vector instruction's `rs3` operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DType {
    /// IEEE binary32 (`float`).
    F32 = 0,
    /// IEEE binary16 (`half`).
    F16 = 1,
    /// Two's-complement 32-bit integer (`int32_t`).
    I32 = 2,
    /// Two's-complement 16-bit integer (`int16_t`).
    I16 = 3,
    /// bfloat16: the top half of an IEEE binary32 (`bfloat16_t`).
    BF16 = 4,
    /// Two's-complement 8-bit integer (`int8_t`): a cast's source or destination, `vdup` and
    /// `vmov` only.
    I8 = 5,
    /// Unsigned 8-bit integer (`uint8_t`): as [`DType::I8`].
    U8 = 6,
    /// Two's-complement 4-bit integer (Ascend C's `int4b_t`), two to a byte: element `2k` in
    /// bits 0..4 of byte `k`, element `2k + 1` in bits 4..8. A cast's source or destination
    /// only, over an even count.
    I4 = 7,
}

impl DType {
    /// Every type, by code.
    pub const ALL: [DType; 8] = [
        DType::F32,
        DType::F16,
        DType::I32,
        DType::I16,
        DType::BF16,
        DType::I8,
        DType::U8,
        DType::I4,
    ];

    /// The type with code `code`.
    pub fn from_code(code: u64) -> Option<DType> {
        DType::ALL.get(usize::try_from(code).ok()?).copied()
    }

    /// Bytes per element, rounded up: [`DType::I4`] packs two elements to a byte (see
    /// [`DType::bytes`] for the span of a count).
    pub const fn size(self) -> u64 {
        self.bits().div_ceil(8)
    }

    /// Bits per element.
    pub const fn bits(self) -> u64 {
        match self {
            DType::F32 | DType::I32 => 32,
            DType::F16 | DType::I16 | DType::BF16 => 16,
            DType::I8 | DType::U8 => 8,
            DType::I4 => 4,
        }
    }

    /// Bytes `n` elements occupy (an odd count of [`DType::I4`] ends in half a byte, counted).
    pub const fn bytes(self, n: u64) -> u64 {
        (n * self.bits()).div_ceil(8)
    }

    /// A floating-point type.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16)
    }

    /// The name used in docs and messages.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I32 => "i32",
            DType::I16 => "i16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I4 => "i4",
        }
    }

    /// Reads the element at the start of `bytes` exactly.
    #[inline]
    pub fn load(self, bytes: &[u8]) -> f64 {
        match self {
            DType::F32 => f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as f64,
            DType::F16 => f16_to_f32(u16::from_le_bytes([bytes[0], bytes[1]])) as f64,
            DType::I32 => i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as f64,
            DType::I16 => i16::from_le_bytes([bytes[0], bytes[1]]) as f64,
            DType::BF16 => bf16_to_f32(u16::from_le_bytes([bytes[0], bytes[1]])) as f64,
            DType::I8 => bytes[0] as i8 as f64,
            DType::U8 => bytes[0] as f64,
            DType::I4 => i4_value(bytes[0]),
        }
    }

    /// Writes `v`, which must already be a value of this type (see [`round_float`] and
    /// [`round_int`]), to the start of `out`.
    #[inline]
    pub fn store(self, v: f64, out: &mut [u8]) {
        match self {
            DType::F32 => out[..4].copy_from_slice(&(v as f32).to_le_bytes()),
            DType::F16 => out[..2].copy_from_slice(&f32_to_f16(v as f32).to_le_bytes()),
            DType::I32 => out[..4].copy_from_slice(&(v as i32).to_le_bytes()),
            DType::I16 => out[..2].copy_from_slice(&(v as i16).to_le_bytes()),
            DType::BF16 => {
                out[..2].copy_from_slice(&(((v as f32).to_bits() >> 16) as u16).to_le_bytes())
            }
            DType::I8 => out[0] = v as i8 as u8,
            DType::U8 => out[0] = v as u8,
            // The low nibble; the high one (the next element) is kept.
            DType::I4 => out[0] = (out[0] & 0xf0) | (v as i8 as u8 & 0x0f),
        }
    }

    /// The value of a scalar operand: the low bits of the register, in this type's encoding.
    pub fn scalar(self, reg: u64) -> f64 {
        match self {
            DType::F32 => f32::from_bits(reg as u32) as f64,
            DType::F16 => f16_to_f32(reg as u16) as f64,
            DType::I32 => reg as u32 as i32 as f64,
            DType::I16 => reg as u16 as i16 as f64,
            DType::BF16 => bf16_to_f32(reg as u16) as f64,
            DType::I8 => reg as u8 as i8 as f64,
            DType::U8 => reg as u8 as f64,
            DType::I4 => i4_value(reg as u8),
        }
    }

    /// The range of an integer type.
    pub const fn int_range(self) -> (i64, i64) {
        match self {
            DType::I16 => (i16::MIN as i64, i16::MAX as i64),
            DType::I8 => (i8::MIN as i64, i8::MAX as i64),
            DType::U8 => (0, u8::MAX as i64),
            DType::I4 => (-8, 7),
            _ => (i32::MIN as i64, i32::MAX as i64),
        }
    }
}

/// The value of the 4-bit two's-complement integer in the low nibble of `b`.
fn i4_value(b: u8) -> f64 {
    ((b << 4) as i8 >> 4) as f64
}

/// Element `i` of a packed [`DType::I4`] array (`bytes` starting at element 0).
#[inline]
pub fn load_i4(bytes: &[u8], i: usize) -> f64 {
    i4_value(bytes[i / 2] >> (4 * (i % 2)))
}

/// Writes `v` (an integer in -8..=7) as element `i` of a packed [`DType::I4`] array, keeping
/// the other element of its byte.
#[inline]
pub fn store_i4(v: f64, bytes: &mut [u8], i: usize) {
    let shift = 4 * (i % 2);
    let nibble = (v as i8 as u8 & 0x0f) << shift;
    bytes[i / 2] = (bytes[i / 2] & !(0x0f << shift)) | nibble;
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a cast rounds: Ascend C's `RoundMode`, in its order. Bits 36..40 of a cast's `rs3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RoundMode {
    /// `CAST_NONE`: exact casts stay exact; a cast that can lose precision rounds to nearest,
    /// ties to even (as `CAST_RINT`); float → float of the same type copies.
    None = 0,
    /// `CAST_RINT`: to nearest, ties to even.
    Rint = 1,
    /// `CAST_FLOOR`: toward −∞.
    Floor = 2,
    /// `CAST_CEIL`: toward +∞.
    Ceil = 3,
    /// `CAST_ROUND`: to nearest, ties away from zero.
    Round = 4,
    /// `CAST_TRUNC`: toward zero.
    Trunc = 5,
    /// `CAST_ODD`: toward zero, then an inexact result gets its last significand bit set
    /// (von Neumann rounding; used before a second rounding to avoid double-rounding errors).
    Odd = 6,
}

impl RoundMode {
    /// Every mode, by code.
    pub const ALL: [RoundMode; 7] = [
        RoundMode::None,
        RoundMode::Rint,
        RoundMode::Floor,
        RoundMode::Ceil,
        RoundMode::Round,
        RoundMode::Trunc,
        RoundMode::Odd,
    ];

    /// The mode with code `code`.
    pub fn from_code(code: u64) -> Option<RoundMode> {
        RoundMode::ALL.get(usize::try_from(code).ok()?).copied()
    }
}

/// The comparison of `vcmp`: Ascend C's `CMPMODE`, in its order. Bits 36..40 of `rs3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CmpMode {
    /// `a < b`.
    Lt = 0,
    /// `a > b`.
    Gt = 1,
    /// `a == b`.
    Eq = 2,
    /// `a <= b`.
    Le = 3,
    /// `a >= b`.
    Ge = 4,
    /// `a != b`.
    Ne = 5,
}

impl CmpMode {
    /// Every mode, by code.
    pub const ALL: [CmpMode; 6] = [
        CmpMode::Lt,
        CmpMode::Gt,
        CmpMode::Eq,
        CmpMode::Le,
        CmpMode::Ge,
        CmpMode::Ne,
    ];

    /// The mode with code `code`.
    pub fn from_code(code: u64) -> Option<CmpMode> {
        CmpMode::ALL.get(usize::try_from(code).ok()?).copied()
    }

    /// Whether `a` and `b` compare true (IEEE: any comparison with a NaN is false but `!=`).
    #[inline]
    pub fn holds(self, a: f64, b: f64) -> bool {
        match self {
            CmpMode::Lt => a < b,
            CmpMode::Gt => a > b,
            CmpMode::Eq => a == b,
            CmpMode::Le => a <= b,
            CmpMode::Ge => a >= b,
            CmpMode::Ne => a != b,
        }
    }
}

/// The f32 value of the bfloat16 bit pattern `b` (exact).
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// The bfloat16 bit pattern of `f` rounded with `mode` (NaN stays NaN).
pub fn f32_to_bf16_rounded(f: f32, mode: RoundMode) -> u16 {
    if f.is_nan() {
        return ((f.to_bits() >> 16) as u16) | 0x40;
    }
    ((round_float(f as f64, DType::BF16, mode) as f32).to_bits() >> 16) as u16
}

/// `x` rounded to an integer with `mode` (`None` and `Odd` as documented on [`RoundMode`]:
/// `None` rounds to nearest even, `Odd` truncates and makes an inexact result odd).
fn round_integral(x: f64, mode: RoundMode) -> f64 {
    match mode {
        RoundMode::None | RoundMode::Rint => x.round_ties_even(),
        RoundMode::Floor => x.floor(),
        RoundMode::Ceil => x.ceil(),
        RoundMode::Round => x.round(),
        RoundMode::Trunc => x.trunc(),
        RoundMode::Odd => {
            let t = x.trunc();
            if t != x && t % 2.0 == 0.0 {
                t + x.signum()
            } else {
                t
            }
        }
    }
}

/// Significand bits (with the implicit one), smallest normal exponent, largest exponent.
const fn format(dtype: DType) -> (i32, i32, i32) {
    match dtype {
        DType::F16 => (11, -14, 15),
        DType::BF16 => (8, -126, 127),
        _ => (24, -126, 127),
    }
}

/// `x` rounded once to the floating-point type `dtype` (F32, F16 or BF16) with `mode`, as an exact
/// `f64`. Overflow follows the mode: to nearest (ties either way) gives ±∞; toward zero and odd
/// give ±max; floor / ceil give ±max or ±∞ depending on the side. NaN stays NaN.
pub fn round_float(x: f64, dtype: DType, mode: RoundMode) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let (p, emin, emax) = format(dtype);
    // The exponent of x (x is never an f64 subnormal here: every source type is far inside
    // f64's normal range, and so are the results of the vector unit's f64 transcendentals
    // once they matter).
    let e = ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let q = e.max(emin) - (p - 1);
    let scaled = x * 2f64.powi(-q);
    let r = round_integral(scaled, mode) * 2f64.powi(q);
    let max = (2.0 - 2f64.powi(1 - p)) * 2f64.powi(emax);
    if r.abs() <= max {
        return r;
    }
    let toward_inf = match mode {
        RoundMode::None | RoundMode::Rint | RoundMode::Round => true,
        RoundMode::Trunc | RoundMode::Odd => false,
        RoundMode::Floor => x < 0.0,
        RoundMode::Ceil => x > 0.0,
    };
    let m = if toward_inf { f64::INFINITY } else { max };
    m.copysign(x)
}

/// `x` rounded to an integer of type `dtype` (I32, I16, I8, U8 or I4) with `mode`, saturating at
/// the type's range; NaN gives 0.
pub fn round_int(x: f64, dtype: DType, mode: RoundMode) -> f64 {
    if x.is_nan() {
        return 0.0;
    }
    let (lo, hi) = dtype.int_range();
    round_integral(x, mode).clamp(lo as f64, hi as f64)
}

/// `x`, a value of type `src`, cast to `dst` with `mode`, as an exact `f64`.
///
/// - to a float type: rounded once ([`round_float`]); float → float of the *same* type with a
///   mode other than `None` rounds to an integral value (Ascend's `Cast` of f32 to f32);
/// - to f16 from another type: a finite value past f16's range saturates at ±65504 in every
///   mode (Ascend C's Cast table: float → half overflow saturates); ±∞ and NaN stay;
/// - to an integer type: rounded to an integer, saturating ([`round_int`]).
pub fn cast(x: f64, src: DType, dst: DType, mode: RoundMode) -> f64 {
    if dst.is_float() {
        if src == dst {
            return if mode == RoundMode::None || !x.is_finite() {
                x
            } else {
                round_integral(x, mode)
            };
        }
        let r = round_float(x, dst, mode);
        if dst == DType::F16 && x.is_finite() && r.is_infinite() {
            return 65504f64.copysign(x);
        }
        r
    } else {
        round_int(x, dst, mode)
    }
}

/// The f16 bit pattern of `f` rounded with `mode` (`RoundMode::None` and `Rint` are the same
/// as [`f32_to_f16`]).
pub fn f32_to_f16_rounded(f: f32, mode: RoundMode) -> u16 {
    if f.is_nan() {
        return f32_to_f16(f);
    }
    f32_to_f16(round_float(f as f64, DType::F16, mode) as f32)
}

/// The f16 bit pattern of `x` rounded once with `mode` (no intermediate f32 rounding).
pub fn f64_to_f16_rounded(x: f64, mode: RoundMode) -> u16 {
    if x.is_nan() {
        return f32_to_f16(f32::NAN);
    }
    f32_to_f16(round_float(x, DType::F16, mode) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_modes_on_a_value_between_two_halves() {
        // 1 + 2^-11 is the midpoint between 1.0 (0x3c00) and 1 + 2^-10 (0x3c01).
        let mid = 1.0 + 2f32.powi(-11);
        assert_eq!(f32_to_f16_rounded(mid, RoundMode::Rint), 0x3c00);
        assert_eq!(f32_to_f16_rounded(mid, RoundMode::Round), 0x3c01);
        assert_eq!(f32_to_f16_rounded(mid, RoundMode::Floor), 0x3c00);
        assert_eq!(f32_to_f16_rounded(mid, RoundMode::Ceil), 0x3c01);
        assert_eq!(f32_to_f16_rounded(mid, RoundMode::Trunc), 0x3c00);
        assert_eq!(f32_to_f16_rounded(mid, RoundMode::Odd), 0x3c01);
        assert_eq!(f32_to_f16_rounded(-mid, RoundMode::Floor), 0xbc01);
        assert_eq!(f32_to_f16_rounded(-mid, RoundMode::Ceil), 0xbc00);
        assert_eq!(f32_to_f16_rounded(70000.0, RoundMode::Trunc), 0x7bff);
        assert_eq!(f32_to_f16_rounded(70000.0, RoundMode::Rint), 0x7c00);
        assert_eq!(f32_to_f16_rounded(-70000.0, RoundMode::Ceil), 0xfbff);
        assert_eq!(f32_to_f16_rounded(-70000.0, RoundMode::Floor), 0xfc00);
    }

    #[test]
    fn i4_elements_pack_two_to_a_byte_low_nibble_first() {
        let mut b = [0u8; 2];
        for (i, v) in [-8.0, 7.0, -1.0, 3.0].into_iter().enumerate() {
            store_i4(v, &mut b, i);
        }
        assert_eq!(b, [0x78, 0x3f]);
        let back: Vec<f64> = (0..4).map(|i| load_i4(&b, i)).collect();
        assert_eq!(back, [-8.0, 7.0, -1.0, 3.0]);
        assert_eq!(DType::I4.bytes(6), 3);
        assert_eq!(DType::from_code(7), Some(DType::I4));
        assert_eq!(cast(7.5, DType::F16, DType::I4, RoundMode::Rint), 7.0);
        assert_eq!(cast(-9.0, DType::F16, DType::I4, RoundMode::Trunc), -8.0);
        assert_eq!(cast(-2.5, DType::F16, DType::I4, RoundMode::Round), -3.0);
    }

    #[test]
    fn integer_casts_saturate_and_round() {
        assert_eq!(cast(2.5, DType::F32, DType::I32, RoundMode::Rint), 2.0);
        assert_eq!(cast(2.5, DType::F32, DType::I32, RoundMode::Round), 3.0);
        assert_eq!(cast(-2.5, DType::F32, DType::I32, RoundMode::Floor), -3.0);
        assert_eq!(cast(-2.5, DType::F32, DType::I32, RoundMode::Trunc), -2.0);
        assert_eq!(
            cast(1e10, DType::F32, DType::I32, RoundMode::Rint),
            i32::MAX as f64
        );
        assert_eq!(
            cast(-40000.0, DType::F32, DType::I16, RoundMode::Rint),
            -32768.0
        );
        assert_eq!(cast(f64::NAN, DType::F16, DType::I32, RoundMode::Rint), 0.0);
        assert_eq!(cast(2.5, DType::F32, DType::F32, RoundMode::Ceil), 3.0);
        assert_eq!(cast(2.5, DType::F32, DType::F32, RoundMode::None), 2.5);
        // 2^24 + 1 is not an f32.
        let big = 16_777_217.0;
        assert_eq!(
            cast(big, DType::I32, DType::F32, RoundMode::Rint),
            16_777_216.0
        );
        assert_eq!(
            cast(big, DType::I32, DType::F32, RoundMode::Ceil),
            16_777_218.0
        );
    }
}
