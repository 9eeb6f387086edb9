//! The pool's indexes: the TLSF free lists of a heap, the live-block table by address, and
//! the per-chunk bitmap of live block starts.

use super::{Block, NIL};

pub(super) const SL_LOG2: u32 = 5;
pub(super) const SL: usize = 1 << SL_LOG2;
pub(super) const FL: usize = 64;
/// Entries of the request's own size list checked before the rounded-up search.
pub(super) const EXACT_SCAN: usize = 4;

/// The TLSF index of one heap: free lists by size class, with bitmaps of non-empty lists.
/// Sizes are in the heap's units. Class `(0, s)` holds exactly `s` units (`s < 32`); class
/// `(f, s)` for `f >= 1` holds `[2^(f+4) + s·2^(f-1), 2^(f+4) + (s+1)·2^(f-1))`.
#[derive(Debug)]
pub(super) struct FreeLists {
    fl_bitmap: u64,
    sl_bitmap: [u32; FL],
    heads: [[u32; SL]; FL],
}

/// The class `(fl, sl)` of a block of `units` units. The masks are no-ops on the values that
/// occur (`fl < 60`, `sl < 32`) and let the compiler drop the bounds checks on the tables.
#[inline(always)]
pub(super) fn mapping(units: u64) -> (usize, usize) {
    if units < SL as u64 {
        (0, units as usize & (SL - 1))
    } else {
        let log = 63 - units.leading_zeros();
        let fl = log - SL_LOG2 + 1;
        let sl = (units >> (log - SL_LOG2)) as usize - SL;
        (fl as usize & (FL - 1), sl & (SL - 1))
    }
}

impl FreeLists {
    pub(super) const fn new() -> Self {
        Self {
            fl_bitmap: 0,
            sl_bitmap: [0; FL],
            heads: [[NIL; SL]; FL],
        }
    }

    #[inline(always)]
    pub(super) fn insert(&mut self, blocks: &mut [Block], b: u32, shift: u32) {
        let (fl, sl) = mapping(blocks[b as usize].len >> shift);
        let head = self.heads[fl][sl];
        blocks[b as usize].prev_free = NIL;
        blocks[b as usize].next_free = head;
        if head != NIL {
            blocks[head as usize].prev_free = b;
        }
        self.heads[fl][sl] = b;
        self.fl_bitmap |= 1 << fl;
        self.sl_bitmap[fl] |= 1 << sl;
    }

    #[inline(always)]
    pub(super) fn remove(&mut self, blocks: &mut [Block], b: u32, shift: u32) {
        let Block {
            prev_free,
            next_free,
            len,
            ..
        } = blocks[b as usize];
        if prev_free != NIL {
            blocks[prev_free as usize].next_free = next_free;
        } else {
            let (fl, sl) = mapping(len >> shift);
            self.heads[fl][sl] = next_free;
            if next_free == NIL {
                self.sl_bitmap[fl] &= !(1 << sl);
                if self.sl_bitmap[fl] == 0 {
                    self.fl_bitmap &= !(1 << fl);
                }
            }
        }
        if next_free != NIL {
            blocks[next_free as usize].prev_free = prev_free;
        }
    }

    /// Takes a free block of at least `len` bytes (a whole number of `1 << shift` units) off
    /// its list.
    #[inline]
    pub(super) fn find(&mut self, blocks: &mut [Block], len: u64, shift: u32) -> Option<u32> {
        let units = len >> shift;
        let (fl, sl) = mapping(units);
        // The request's own list first: below 32 units classes are exact so its head fits;
        // above, a few entries are tried so that a block freed at this size is reused whole
        // rather than a larger one split (best fit where it is cheap).
        let mut b = self.heads[fl][sl];
        for _ in 0..EXACT_SCAN {
            if b == NIL {
                break;
            }
            if blocks[b as usize].len >= len {
                self.remove(blocks, b, shift);
                return Some(b);
            }
            b = blocks[b as usize].next_free;
        }
        // Good fit: round the request up to the next class boundary, so that the head of any
        // non-empty list at or above it fits, and find that list with two bit scans.
        let rounded = if units < SL as u64 {
            units
        } else {
            let log = 63 - units.leading_zeros();
            units + (1 << (log - SL_LOG2)) - 1
        };
        let (fl, sl) = mapping(rounded);
        let sl_map = self.sl_bitmap[fl] & (!0u32 << sl);
        let (fl, sl) = if sl_map != 0 {
            (fl, sl_map.trailing_zeros() as usize)
        } else {
            let fl_map = self.fl_bitmap & (!0u64).checked_shl(fl as u32 + 1).unwrap_or(0);
            if fl_map == 0 {
                return None;
            }
            let fl = fl_map.trailing_zeros() as usize;
            (fl, self.sl_bitmap[fl].trailing_zeros() as usize)
        };
        let b = self.heads[fl][sl];
        self.remove(blocks, b, shift);
        Some(b)
    }

    /// Length in bytes of the largest free block (scans the highest non-empty list).
    pub(super) fn largest(&self, blocks: &[Block]) -> u64 {
        if self.fl_bitmap == 0 {
            return 0;
        }
        let fl = 63 - self.fl_bitmap.leading_zeros() as usize;
        let sl = 31 - self.sl_bitmap[fl].leading_zeros() as usize;
        let mut b = self.heads[fl][sl];
        let mut largest = 0;
        while b != NIL {
            largest = largest.max(blocks[b as usize].len);
            b = blocks[b as usize].next_free;
        }
        largest
    }
}

/// Live blocks by start address: an open-addressing table with linear probing and
/// backward-shift deletion (no tombstones, so a steady alloc/free stream never degrades it or
/// rehashes), kept at most a quarter full so that probe runs stay short. Keys are 64-byte aligned addresses; Fibonacci hashing of `va / 64` takes the top
/// bits of a golden-ratio product, which spreads consecutive and strided addresses alike. It
/// replaces a general hash map because the pool's fast path is two lookups per alloc+free and
/// the general map's SIMD group probing and tombstones cost several times more here.
#[derive(Debug)]
pub(super) struct LiveMap {
    keys: Box<[u64]>,
    values: Box<[u32]>,
    pub(super) len: usize,
    /// `64 - log2(capacity)`.
    shift: u32,
}

/// Marks an empty slot: never a block address (those are 64-byte aligned).
pub(super) const EMPTY: u64 = u64::MAX;

impl LiveMap {
    pub(super) const MIN_CAPACITY: usize = 64;

    pub(super) fn new() -> Self {
        Self::with_capacity(Self::MIN_CAPACITY)
    }

    pub(super) fn with_capacity(capacity: usize) -> Self {
        Self {
            keys: vec![EMPTY; capacity].into_boxed_slice(),
            values: vec![0; capacity].into_boxed_slice(),
            len: 0,
            shift: 64 - capacity.trailing_zeros(),
        }
    }

    #[inline(always)]
    pub(super) fn home(&self, va: u64) -> usize {
        ((va >> 6).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline(always)]
    pub(super) fn mask(&self) -> usize {
        self.keys.len() - 1
    }

    #[inline]
    pub(super) fn get(&self, va: u64) -> Option<u32> {
        let mut i = self.home(va);
        loop {
            match self.keys[i] {
                k if k == va => return Some(self.values[i]),
                EMPTY => return None,
                _ => i = (i + 1) & self.mask(),
            }
        }
    }

    /// Inserts a key that is not present.
    #[inline(always)]
    pub(super) fn insert(&mut self, va: u64, value: u32) {
        if (self.len + 1) * 4 > self.keys.len() {
            self.grow();
        }
        let mut i = self.home(va);
        while self.keys[i] != EMPTY {
            i = (i + 1) & self.mask();
        }
        self.keys[i] = va;
        self.values[i] = value;
        self.len += 1;
    }

    #[inline(always)]
    pub(super) fn remove(&mut self, va: u64) -> Option<u32> {
        let mask = self.mask();
        let mut i = self.home(va);
        loop {
            match self.keys[i] {
                k if k == va => break,
                EMPTY => return None,
                _ => i = (i + 1) & mask,
            }
        }
        let value = self.values[i];
        // Backward shift: pull later entries of the probe run into the hole when the hole lies
        // between their home slot and their current slot, so lookups never cross a gap.
        let mut hole = i;
        let mut j = (i + 1) & mask;
        while self.keys[j] != EMPTY {
            let home = self.home(self.keys[j]);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.keys[hole] = self.keys[j];
                self.values[hole] = self.values[j];
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.keys[hole] = EMPTY;
        self.len -= 1;
        Some(value)
    }

    #[cold]
    pub(super) fn grow(&mut self) {
        let mut bigger = Self::with_capacity(self.keys.len() * 2);
        for (&k, &v) in self.keys.iter().zip(self.values.iter()) {
            if k != EMPTY {
                bigger.insert(k, v);
            }
        }
        *self = bigger;
    }

    pub(super) fn clear(&mut self) {
        *self = Self::new();
    }
}

/// A hierarchical bitmap over a chunk's units marking where live blocks start: level 0 has a
/// bit per unit, each level above a bit per non-zero word below, so finding the last set bit at
/// or before a position takes one word per level (six levels cover 2^42 units, more than any
/// chunk of the largest modeled device). All levels share one allocation (level 0 first) so
/// that the common update,
/// which stops at level 0, is a single dependent load. Host cost: 1/512 of the chunk's size for
/// small chunks, 1/4096 for large ones.
#[derive(Debug)]
pub(super) struct StartBitmap {
    words: Box<[u64]>,
    /// Start of each level in `words`, and how many levels there are.
    level_start: [u32; 6],
    levels: usize,
}

impl StartBitmap {
    pub(super) fn new(bits: u64) -> Self {
        let mut level_start = [0u32; 6];
        let mut levels = 0;
        let mut total = 0u64;
        let mut words = bits.div_ceil(64).max(1);
        loop {
            level_start[levels] = total as u32;
            levels += 1;
            total += words;
            if words == 1 || levels == level_start.len() {
                break;
            }
            words = words.div_ceil(64);
        }
        Self {
            words: vec![0u64; total as usize].into_boxed_slice(),
            level_start,
            levels,
        }
    }

    #[inline]
    pub(super) fn word(&mut self, level: usize, index: u64) -> &mut u64 {
        &mut self.words[self.level_start[level] as usize + index as usize]
    }

    #[inline]
    pub(super) fn set(&mut self, mut i: u64) {
        // Setting a summary bit that is already set is harmless, and the upper levels are
        // tiny and hot: no early exit, so no branch to mispredict.
        for level in 0..self.levels {
            *self.word(level, i / 64) |= 1 << (i % 64);
            i /= 64;
        }
    }

    #[inline]
    pub(super) fn clear(&mut self, mut i: u64) {
        for level in 0..self.levels {
            let word = self.word(level, i / 64);
            *word &= !(1 << (i % 64));
            if *word != 0 {
                break;
            }
            i /= 64;
        }
    }

    /// The last set bit at or before `i`.
    pub(super) fn pred(&self, i: u64) -> Option<u64> {
        let at = |level: usize, index: u64| {
            self.words[self.level_start[level] as usize + index as usize]
        };
        let mut level = 0;
        let mut i = i;
        loop {
            let word_index = i / 64;
            let word = at(level, word_index) & (!0u64 >> (63 - i % 64));
            if word != 0 {
                // Descend along the highest set bits.
                let mut pos = word_index * 64 + u64::from(63 - word.leading_zeros());
                while level > 0 {
                    level -= 1;
                    pos = pos * 64 + u64::from(63 - at(level, pos).leading_zeros());
                }
                return Some(pos);
            }
            if word_index == 0 || level + 1 == self.levels {
                return None;
            }
            // Nothing at or before `i` in this word: look for an earlier non-empty word.
            level += 1;
            i = word_index - 1;
        }
    }
}
