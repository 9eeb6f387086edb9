//! Shadow memory: the intervals of one address space and how they are split, pruned and
//! merged.

use super::*;

/// Drops from `[start, end)` of `space` the accesses `host` covers, and the intervals left
/// empty.
pub(super) fn prune(
    space: Option<&mut BTreeMap<u64, Segment>>,
    start: u64,
    end: u64,
    host: &VectorClock,
) {
    let Some(space) = space else {
        return;
    };
    split(space, start);
    split(space, end);
    let mut empty = Vec::new();
    for (&k, seg) in space.range_mut(start..end) {
        if seg
            .write
            .as_ref()
            .is_some_and(|w| host.covers(w.slot, w.clock))
        {
            seg.write = None;
        }
        seg.reads.retain(|r| !host.covers(r.slot, r.clock));
        if seg.write.is_none() && seg.reads.is_empty() {
            empty.push(k);
        }
    }
    for k in empty {
        space.remove(&k);
    }
    coalesce(space, start, end);
}

/// Splits the interval that holds `at` so that one starts there.
pub(super) fn split(space: &mut BTreeMap<u64, Segment>, at: u64) {
    let Some((&s, seg)) = space.range_mut(..at).next_back() else {
        return;
    };
    if seg.end <= at {
        return;
    }
    let mut right = seg.clone();
    seg.end = at;
    right.end = right.end.max(at);
    let _ = s;
    space.insert(at, right);
}

/// Merges neighbouring intervals around `[start, end)` that hold the same state.
pub(super) fn coalesce(space: &mut BTreeMap<u64, Segment>, start: u64, end: u64) {
    let from = space.range(..start).next_back().map_or(start, |(&s, _)| s);
    let keys: Vec<u64> = space.range(from..=end).map(|(&k, _)| k).collect();
    let mut prev: Option<u64> = None;
    for k in keys {
        if let Some(p) = prev {
            let (pe, same) = {
                let a = &space[&p];
                let b = &space[&k];
                (a.end, a.end == k && a.same_state(b))
            };
            let _ = pe;
            if same {
                let seg = space.remove(&k).expect("listed");
                space.get_mut(&p).expect("listed").end = seg.end;
                continue;
            }
        }
        prev = Some(k);
    }
}
