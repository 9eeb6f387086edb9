//! Vector clocks: per clock thread, the latest position known to happen before.

/// A vector clock: per clock thread (a stream's slot), the latest position known to happen
/// before.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VectorClock(Vec<u64>);

impl VectorClock {
    /// The position of `slot` this clock has seen.
    #[inline]
    pub fn get(&self, slot: u32) -> u64 {
        self.0.get(slot as usize).copied().unwrap_or(0)
    }

    /// Raises `slot` to `v`.
    pub fn set(&mut self, slot: u32, v: u64) {
        let i = slot as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] = self.0[i].max(v);
    }

    /// Joins `other` in (element-wise maximum).
    pub fn join(&mut self, other: &VectorClock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(*b);
        }
    }

    /// Lowers each slot to `other`'s (element-wise minimum; a slot `other` lacks is 0).
    pub fn meet(&mut self, other: &VectorClock) {
        for (i, v) in self.0.iter_mut().enumerate() {
            *v = (*v).min(other.0.get(i).copied().unwrap_or(0));
        }
    }

    /// Whether epoch `(slot, clock)` happens before (or is) this clock.
    #[inline]
    pub fn covers(&self, slot: u32, clock: u64) -> bool {
        self.get(slot) >= clock
    }

    /// Bytes this clock uses.
    pub fn heap_bytes(&self) -> usize {
        self.0.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_only_raises_and_join_is_the_element_wise_maximum() {
        let mut a = VectorClock::default();
        a.set(2, 5);
        a.set(2, 3);
        assert_eq!(a.get(2), 5);
        assert_eq!(a.get(0), 0);
        assert_eq!(a.get(9), 0);
        let mut b = VectorClock::default();
        b.set(0, 7);
        b.set(2, 1);
        a.join(&b);
        assert_eq!((a.get(0), a.get(1), a.get(2)), (7, 0, 5));
    }

    #[test]
    fn meet_is_the_element_wise_minimum_and_missing_slots_count_zero() {
        let mut a = VectorClock::default();
        a.set(0, 4);
        a.set(1, 9);
        let mut b = VectorClock::default();
        b.set(0, 6);
        a.meet(&b);
        assert_eq!((a.get(0), a.get(1)), (4, 0));
    }

    #[test]
    fn covers_an_epoch_at_or_below_its_slot() {
        let mut a = VectorClock::default();
        a.set(3, 10);
        assert!(a.covers(3, 10));
        assert!(a.covers(3, 1));
        assert!(!a.covers(3, 11));
        assert!(!a.covers(4, 1));
        assert!(a.covers(4, 0));
    }
}
