//! A tiny FxHash-style hasher for the memory system's integer-keyed hash maps (the pool's live
//! blocks, the software TLB). SipHash, the standard default, resists adversarial keys but costs
//! tens of nanoseconds per lookup; our keys are addresses chosen by the simulator itself, so a
//! multiply-based hash is safe and an order of magnitude faster.

use std::hash::{BuildHasherDefault, Hasher};

/// The `rustc-hash` multiplier (an odd constant with well-spread bits).
const K: u64 = 0xf135_7aea_2e62_a9c5;

/// A multiply-rotate hasher for small integer keys. Not for untrusted keys.
#[derive(Clone, Copy, Debug, Default)]
pub struct FxHasher {
    hash: u64,
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u64(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(K);
    }

    #[inline]
    fn write_u32(&mut self, word: u32) {
        self.write_u64(u64::from(word));
    }

    #[inline]
    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The product's high bits depend on all key bits but its low bits only on the key's
        // low bits, and aligned addresses have zero low bits; hashbrown picks buckets from the
        // low bits. A second xor-shift-multiply round spreads every key bit over the whole word
        // (plain Fx and a rotate leave strided keys colliding in some strides).
        let h = (self.hash ^ (self.hash >> 32)).wrapping_mul(K);
        h ^ (h >> 32)
    }
}

/// Builds [`FxHasher`]s: `HashMap<K, V, FxBuildHasher>`.
pub type FxBuildHasher = BuildHasherDefault<FxHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn aligned_keys_spread_over_low_bits() {
        let b = FxBuildHasher::default();
        // Random hashing would fill ~63% of 256 buckets; strided addresses must do as well.
        for shift in 0..22 {
            let mut seen = std::collections::BTreeSet::new();
            for i in 0..256u64 {
                seen.insert(b.hash_one(0x10_0000_0000 + (i << shift)) & 255);
            }
            assert!(seen.len() > 140, "stride 2^{shift}: {} buckets", seen.len());
        }
    }
}
