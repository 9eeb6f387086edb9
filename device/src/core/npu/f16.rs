//! IEEE 754 binary16 conversions, in software so results never depend on the host. f16 → f32
//! is exact; f32 → f16 rounds to nearest, ties to even, overflows to infinity, keeps NaNs NaN
//! (quieted, with the top payload bits).

/// The f32 value of the f16 bit pattern `h` (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) >> 15) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match exp {
        0 if man == 0 => sign,
        0 => {
            // Subnormal: man × 2^-24, exactly representable as a normal f32.
            let v = man as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        31 => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// The f16 bit pattern nearest to `f` (ties to even).
pub fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x7f_ffff;
    if exp == 0xff {
        return sign
            | 0x7c00
            | if man != 0 {
                0x200 | (man >> 13) as u16
            } else {
                0
            };
    }
    // The f16 biased exponent of the value.
    let e = exp - 112;
    if e >= 31 {
        return sign | 0x7c00;
    }
    let (kept, rest, half) = if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal result: the significand (with its implicit bit) in units of 2^-24.
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        (m >> shift, m & ((1 << shift) - 1), 1u32 << (shift - 1))
    } else {
        (((e as u32) << 10) | (man >> 13), man & 0x1fff, 0x1000)
    };
    // A carry out of the mantissa bumps the exponent, up to infinity: that is the right result.
    let up = rest > half || (rest == half && kept & 1 == 1);
    sign | (kept + up as u32) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_f16_round_trips() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#06x} -> {f}");
            }
        }
    }

    #[test]
    fn known_values() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert_eq!(f32_to_f16(1e-8), 0);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
    }

    #[test]
    fn midpoints_round_to_even_and_neighbours_round_to_nearest() {
        // Between each pair of adjacent finite positive f16 values.
        for h in 0..0x7bffu16 {
            let (lo, hi) = (f16_to_f32(h), f16_to_f32(h + 1));
            let mid = ((lo as f64 + hi as f64) / 2.0) as f32;
            assert_eq!(mid as f64, (lo as f64 + hi as f64) / 2.0, "midpoint exact");
            let even = if h & 1 == 0 { h } else { h + 1 };
            assert_eq!(f32_to_f16(mid), even, "{h:#06x}");
            assert_eq!(f32_to_f16(f32::from_bits(mid.to_bits() - 1)), h);
            assert_eq!(f32_to_f16(f32::from_bits(mid.to_bits() + 1)), h + 1);
            assert_eq!(f32_to_f16(-mid), 0x8000 | even);
        }
    }
}
