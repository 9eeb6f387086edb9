//! `aclFloat16`, the host's 16-bit float: CANN's `aclFloat16ToFloat` and `aclFloatToFloat16`
//! (declared in `acl/acl_base.h`), which samples' `data_utils.h` uses to print and check half
//! results. IEEE binary16 with round to nearest even, as the device's vector unit and CANN's own
//! conversion compute it. They need no session, so they work before `aclInit`.

/// `float aclFloat16ToFloat(aclFloat16 value)`: the exact float of a binary16 value.
#[unsafe(no_mangle)]
pub extern "C" fn aclFloat16ToFloat(value: u16) -> f32 {
    half::f16::from_bits(value).to_f32()
}

/// `aclFloat16 aclFloatToFloat16(float value)`: the nearest binary16 value (ties to even;
/// beyond the largest finite half, infinity; NaN stays a NaN).
#[unsafe(no_mangle)]
pub extern "C" fn aclFloatToFloat16(value: f32) -> u16 {
    half::f16::from_f32(value).to_bits()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_and_a_half_convert_both_ways_exactly() {
        assert_eq!(aclFloatToFloat16(1.5), 0x3e00);
        assert_eq!(aclFloat16ToFloat(0x3e00), 1.5);
    }

    #[test]
    fn a_float_between_two_halves_rounds_to_the_even_one() {
        // 1 + 2^-11 lies halfway between 1.0 (0x3c00, even) and 1 + 2^-10 (0x3c01).
        assert_eq!(aclFloatToFloat16(1.0 + 2f32.powi(-11)), 0x3c00);
        // 1 + 3·2^-11 lies halfway between 0x3c01 and 0x3c02 (even).
        assert_eq!(aclFloatToFloat16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
    }

    #[test]
    fn overflow_is_infinity_and_nan_stays_nan() {
        assert_eq!(aclFloatToFloat16(70000.0), 0x7c00);
        assert_eq!(aclFloatToFloat16(-70000.0), 0xfc00);
        assert!(aclFloat16ToFloat(aclFloatToFloat16(f32::NAN)).is_nan());
        assert_eq!(aclFloat16ToFloat(0x0001), 2f32.powi(-24)); // the smallest subnormal
    }
}
