//! A stream's doorbell: the submissions API calls rang on it since the last ingest, packed as a
//! runtime's submission queue holds them: each entry is its sequence number, its host time and
//! the descriptor's used bytes only — the fixed words, the argument words it uses
//! (`args[..arg_count]`) and the tiling words it uses (`tiling[..tiling_len]`) — so a one-argument
//! kernel launch writes 72 bytes, not the 256 of a whole [`TaskDescriptor`]. Cold parts
//! ([`TaskExtra`]) ride beside the words, in order.
//!
//! The doorbell transports descriptors and knows no kind's words: what an entry means is read
//! back through the descriptor's own typed views once ingest has unpacked it into its task.

use std::mem::{offset_of, size_of};

use bevy_ecs::entity::Entity;

use crate::task::{MAX_ARGS, MAX_TILING, NewTask, Task, TaskDescriptor, TaskExtra, TaskStatus};
use crate::time::SimTime;

/// Words of a whole descriptor.
const DESC_WORDS: usize = size_of::<TaskDescriptor>() / 8;
/// Words before the argument words (the fixed fields and the PC).
const HEAD_WORDS: usize = offset_of!(TaskDescriptor, args) / 8;
/// The first word of the tiling words.
const TILING_WORD: usize = offset_of!(TaskDescriptor, tiling) / 8;
/// An entry's words before its descriptor: the sequence number (with [`EXTRA`]) and host time.
const META_WORDS: usize = 2;
/// Words an entry takes at most.
const MAX_ENTRY_WORDS: usize = META_WORDS + DESC_WORDS;
/// Set in an entry's first word when a cold part rides beside it.
const EXTRA: u64 = 1 << 63;

// The packing copies the descriptor by words: the head and the arguments are contiguous, the
// tiling words follow the arguments, and nothing comes after them.
const _: () = {
    assert!(size_of::<TaskDescriptor>().is_multiple_of(8));
    assert!(std::mem::align_of::<TaskDescriptor>() <= std::mem::align_of::<u64>());
    assert!(offset_of!(TaskDescriptor, args).is_multiple_of(8));
    assert!(TILING_WORD == HEAD_WORDS + MAX_ARGS);
    assert!(DESC_WORDS == TILING_WORD + MAX_TILING.div_ceil(2));
};

/// The words a descriptor with `arg_count` argument and `tiling_len` tiling words uses: the
/// head and its arguments, and its tiling words (two a word).
#[inline]
fn used_words(arg_count: u32, tiling_len: u32) -> (usize, usize) {
    let args = (arg_count as usize).min(MAX_ARGS);
    let tiling = (tiling_len as usize).min(MAX_TILING);
    (HEAD_WORDS + args, tiling.div_ceil(2))
}

/// [`used_words`] of the descriptor whose head words are `head`.
#[inline]
fn used_words_of_head(head: &[u64]) -> (usize, usize) {
    let bytes: &[u8] = bytemuck::cast_slice(head);
    let word = |at: usize| bytemuck::pod_read_unaligned::<u32>(&bytes[at..at + 4]);
    used_words(
        word(offset_of!(TaskDescriptor, arg_count)),
        word(offset_of!(TaskDescriptor, tiling_len)),
    )
}

/// A stream's submissions since the last ingest, in call order (see the module docs).
#[derive(Debug, Default)]
pub struct Doorbell {
    /// The packed entries (`..used`), then room for the next entry: words an earlier entry or
    /// the growth that made the room left (zero or stale), all initialized, so an entry is
    /// written in place with no `unsafe`.
    words: Vec<u64>,
    /// Words the entries take.
    used: usize,
    /// The cold parts of the entries that have one, in order.
    extras: Vec<TaskExtra>,
    /// Entries.
    len: usize,
    /// Where the last entry starts in `words`.
    last: usize,
}

impl Doorbell {
    /// An empty doorbell.
    pub fn new() -> Self {
        Self::default()
    }

    /// Entries rung since the last ingest.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was rung since the last ingest.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every entry (keeping the memory for the next ones).
    pub fn clear(&mut self) {
        self.used = 0;
        self.extras.clear();
        self.len = 0;
        self.last = 0;
    }

    /// Rings `new` (its `stream` is the doorbell's own, and is not kept).
    pub fn push(&mut self, new: NewTask) {
        self.push_descriptor(new.seq, new.submit, new.extra, &new.desc);
    }

    /// Rings the descriptor `encode` writes, at sequence number `seq` and host time `submit`:
    /// the submission path's one write of a descriptor. It is written in place, in the
    /// doorbell's room for the next entry, and packed there (only tiling words move, down to
    /// just after the arguments).
    ///
    /// `encode` finds the descriptor's fixed words zero; its argument and tiling words may hold
    /// an earlier entry's, so it writes each it counts (in `arg_count`, `tiling_len`) — as every
    /// kind's encoder does — and only those are carried.
    #[inline(always)]
    pub fn push_with(
        &mut self,
        seq: u64,
        submit: SimTime,
        extra: TaskExtra,
        encode: impl FnOnce(&mut TaskDescriptor),
    ) {
        let at = self.used;
        if self.words.len() < at + MAX_ENTRY_WORDS {
            self.grow_room();
        }
        let room: &mut [u64; MAX_ENTRY_WORDS] = (&mut self.words[at..at + MAX_ENTRY_WORDS])
            .try_into()
            .expect("the room is one entry long");
        let (meta, desc) = room.split_at_mut(META_WORDS);
        let desc: &mut [u64; DESC_WORDS] = desc.try_into().expect("a descriptor's words");
        desc[..HEAD_WORDS].fill(0);
        encode(bytemuck::cast_mut(desc));
        let (head, tiling) = used_words_of_head(&desc[..HEAD_WORDS]);
        if tiling > 0 {
            // An odd count leaves half a word the launch did not write: zero, as it unpacks.
            let d: &mut TaskDescriptor = bytemuck::cast_mut(desc);
            let n = (d.tiling_len as usize).min(MAX_TILING);
            if !n.is_multiple_of(2) {
                d.tiling[n] = 0;
            }
            // Down to just after the arguments (the ranges may overlap).
            desc.copy_within(TILING_WORD..TILING_WORD + tiling, head);
        }
        let has_extra = !matches!(extra, TaskExtra::None);
        meta[0] = seq & !EXTRA | if has_extra { EXTRA } else { 0 };
        meta[1] = submit.0;
        self.used = at + META_WORDS + head + tiling;
        self.last = at;
        if has_extra {
            self.extras.push(extra);
        } else {
            // Nothing to drop: no call to drop it.
            std::mem::forget(extra);
        }
        self.len += 1;
    }

    /// Makes room for one more entry after the entries (amortized: the room doubles).
    #[cold]
    #[inline(never)]
    fn grow_room(&mut self) {
        let want = (self.used + MAX_ENTRY_WORDS).max(2 * self.words.len());
        self.words.resize(want, 0);
    }

    /// Rings descriptor `d` at sequence number `seq` and host time `submit`.
    #[inline]
    pub fn push_descriptor(
        &mut self,
        seq: u64,
        submit: SimTime,
        extra: TaskExtra,
        d: &TaskDescriptor,
    ) {
        self.push_with(seq, submit, extra, |w| *w = *d);
    }

    /// The latest entry, if any.
    pub fn last(&self) -> Option<Rung<'_>> {
        if self.is_empty() {
            return None;
        }
        let (rung, _) = self.rung_at(self.last);
        Some(rung)
    }

    /// The latest entry's cold part ([`TaskExtra::None`] if it has none, or there is none).
    pub fn last_extra(&self) -> &TaskExtra {
        match self.last() {
            Some(rung) if rung.has_extra => self.extras.last().unwrap_or(&TaskExtra::None),
            _ => &TaskExtra::None,
        }
    }

    /// Every entry, oldest first, with its cold part (or [`TaskExtra::None`]); the doorbell is
    /// empty afterwards.
    #[inline]
    pub fn drain(&mut self, mut each: impl FnMut(Rung<'_>, TaskExtra)) {
        let (mut at, mut extras) = (0, 0);
        while at < self.used {
            let (rung, next) = rung_at(&self.words, at);
            let extra = match self.extras.get_mut(extras) {
                Some(extra) if rung.has_extra => {
                    extras += 1;
                    std::mem::take(extra)
                }
                _ => TaskExtra::None,
            };
            each(rung, extra);
            at = next;
        }
        self.clear();
    }

    fn rung_at(&self, at: usize) -> (Rung<'_>, usize) {
        rung_at(&self.words, at)
    }
}

/// The entry starting at word `at` of `words`, and where the next one starts.
#[inline]
fn rung_at(words: &[u64], at: usize) -> (Rung<'_>, usize) {
    let meta = words[at];
    let submit = SimTime(words[at + 1]);
    let body = at + META_WORDS;
    // The head says how many words follow it.
    let (head, tiling) = used_words_of_head(&words[body..body + HEAD_WORDS]);
    let end = body + head + tiling;
    (
        Rung {
            seq: meta & !EXTRA,
            submit,
            has_extra: meta & EXTRA != 0,
            head,
            words: &words[body..end],
        },
        end,
    )
}

/// One doorbell entry, borrowed from its doorbell.
#[derive(Clone, Copy, Debug)]
pub struct Rung<'a> {
    /// Sequence number on the stream.
    pub seq: u64,
    /// Host time of the call.
    pub submit: SimTime,
    /// Whether a cold part rides beside it.
    has_extra: bool,
    /// Words of the head and arguments (the rest of `words` are tiling words).
    head: usize,
    /// The descriptor's used words.
    words: &'a [u64],
}

impl Rung<'_> {
    /// Writes the entry's descriptor over `d` (words it did not carry are zero).
    #[inline]
    pub fn descriptor_into(&self, d: &mut TaskDescriptor) {
        // Zeroed whole (a fixed size: a few vector stores), then the carried words.
        *d = bytemuck::Zeroable::zeroed();
        let w: &mut [u64; DESC_WORDS] = bytemuck::cast_mut(d);
        let (head, tiling) = self.words.split_at(self.head);
        // The fixed words at a fixed size (inline moves, no call), then the few arguments.
        let (fixed, args) = head.split_at(HEAD_WORDS);
        w[..HEAD_WORDS].copy_from_slice(fixed);
        for (to, &from) in w[HEAD_WORDS..].iter_mut().zip(args) {
            *to = from;
        }
        if !tiling.is_empty() {
            w[TILING_WORD..TILING_WORD + tiling.len()].copy_from_slice(tiling);
        }
    }

    /// The entry's descriptor.
    pub fn descriptor(&self) -> TaskDescriptor {
        let mut d = bytemuck::Zeroable::zeroed();
        self.descriptor_into(&mut d);
        d
    }

    /// Bytes the entry takes in its doorbell.
    pub fn packed_bytes(&self) -> usize {
        (META_WORDS + self.words.len()) * 8
    }
}

// Here, not beside `Task`: a task is made from a doorbell entry, the doorbell knows the task
// only as the `NewTask` it keeps.
impl Task {
    /// The task for doorbell entry `rung` of `stream` (in `context` on `device`), with its cold
    /// part `extra`.
    pub fn from_rung(
        stream: Entity,
        rung: Rung<'_>,
        extra: TaskExtra,
        context: Entity,
        device: Entity,
    ) -> Self {
        let new = NewTask {
            stream,
            seq: rung.seq,
            submit: rung.submit,
            desc: rung.descriptor(),
            extra,
        };
        Self::from_new(new, context, device)
    }

    /// Reuses a retired task's entity for doorbell entry `rung` of `stream` (in `context` on
    /// `device`), with its cold part `extra`, keeping the entity's allocations.
    #[inline]
    pub fn reuse(
        &mut self,
        stream: Entity,
        rung: Rung<'_>,
        extra: TaskExtra,
        context: Entity,
        device: Entity,
    ) {
        rung.descriptor_into(&mut self.desc);
        self.stream = stream;
        self.context = context;
        self.device = device;
        self.seq = rung.seq;
        self.status = TaskStatus::Queued;
        self.submit = rung.submit;
        self.start = SimTime::ZERO;
        self.end = SimTime::ZERO;
        self.cores = 0;
        self.dma = 0;
        self.applied = false;
        self.access.clear();
        if matches!(self.extra, TaskExtra::None) {
            // A retired task holds no cold part (retire dropped it): nothing to drop, so no
            // call to drop it.
            std::mem::forget(std::mem::replace(&mut self.extra, extra));
        } else {
            self.extra = extra;
        }
        self.error = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::KernelSlot;
    use crate::task::{CopyDir, CopyView, TaskKind};

    fn kernel(args: &[u64], tiling: &[u32]) -> TaskDescriptor {
        let mut d: TaskDescriptor = bytemuck::Zeroable::zeroed();
        d.encode_kernel(
            KernelSlot {
                index: 3,
                generation: 2,
            },
            8,
            args.iter().map(|&w| (w, w % 2 == 1)),
            tiling,
        );
        d.pc = 0x8000_0000;
        d
    }

    fn new(seq: u64, desc: TaskDescriptor, extra: TaskExtra) -> NewTask {
        NewTask {
            stream: Entity::PLACEHOLDER,
            seq,
            submit: SimTime(seq * 10),
            desc,
            extra,
        }
    }

    #[test]
    fn entries_come_back_whole_and_in_order_with_their_cold_parts() {
        let descs = [
            kernel(&[7], &[]),
            kernel(
                &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
                &[9; 20],
            ),
            kernel(&[], &[1, 2, 3]),
            TaskDescriptor::copy(CopyView {
                dst: 0x1000,
                src: 0x2000,
                bytes: 64,
                dir: CopyDir::DeviceToDevice,
            }),
        ];
        let mut bell = Doorbell::new();
        for (i, d) in descs.iter().enumerate() {
            // The second and fourth carry a cold part.
            let extra = if i % 2 == 1 {
                TaskExtra::Host {
                    buffer: crate::host::HostBuffer::new(8, false),
                    offset: i as u64,
                }
            } else {
                TaskExtra::None
            };
            // Encoded in place or pushed whole: the same entry.
            if i < 2 {
                let seq = i as u64 + 1;
                bell.push_with(seq, SimTime(seq * 10), extra, |w| *w = *d);
            } else {
                bell.push(new(i as u64 + 1, *d, extra));
            }
        }
        assert_eq!(bell.len(), 4);
        let last = bell.last().unwrap();
        assert_eq!((last.seq, last.submit), (4, SimTime(40)));
        assert_eq!(last.descriptor().as_copy(), descs[3].as_copy());
        let mut seen = Vec::new();
        bell.drain(|rung, extra| {
            let offset = match extra {
                TaskExtra::Host { offset, .. } => Some(offset),
                _ => None,
            };
            seen.push((rung.seq, rung.submit, rung.descriptor(), offset));
        });
        assert!(bell.is_empty() && bell.last().is_none());
        assert_eq!(seen.len(), 4);
        for (i, (seq, submit, d, offset)) in seen.into_iter().enumerate() {
            assert_eq!((seq, submit), (i as u64 + 1, SimTime((i as u64 + 1) * 10)));
            assert_eq!(bytemuck::bytes_of(&d), bytemuck::bytes_of(&descs[i]));
            assert_eq!(offset, (i % 2 == 1).then_some(i as u64));
        }
        assert_eq!(descs[3].task_kind(), Some(TaskKind::Memcpy));
    }

    #[test]
    fn a_one_argument_launch_takes_72_bytes_and_words_past_the_counts_are_not_carried() {
        let mut bell = Doorbell::new();
        let mut d = kernel(&[42], &[]);
        // A word past `arg_count` is not part of the launch.
        d.args[5] = 99;
        bell.push_with(1, SimTime(1), TaskExtra::None, |w| *w = d);
        let rung = bell.last().unwrap();
        assert_eq!(rung.packed_bytes(), 72);
        let back = rung.descriptor();
        assert_eq!((back.args[0], back.args[5]), (42, 0));
        assert_eq!(back.arg_words(), &[42]);
    }

    #[test]
    fn tiling_words_encoded_in_place_follow_the_arguments() {
        for (args, tiling) in [(0, 1), (1, 3), (5, 20), (16, 20), (16, 1)] {
            let argv: Vec<u64> = (1..=args).collect();
            let til: Vec<u32> = (100..100 + tiling).collect();
            let d = kernel(&argv, &til);
            let mut bell = Doorbell::new();
            bell.push_with(1, SimTime(0), TaskExtra::None, |w| *w = d);
            bell.push_with(2, SimTime(0), TaskExtra::None, |w| *w = kernel(&[9], &[]));
            let mut back = Vec::new();
            bell.drain(|rung, _| back.push(rung.descriptor()));
            assert_eq!(bytemuck::bytes_of(&back[0]), bytemuck::bytes_of(&d));
            assert_eq!(back[0].tiling[..tiling as usize], til[..]);
            assert_eq!(back[1].arg_words(), &[9]);
        }
    }

    #[test]
    fn an_entry_written_over_an_earlier_ones_words_carries_none_of_them() {
        let mut bell = Doorbell::new();
        let wide = kernel(&[u64::MAX; 16], &[u32::MAX; 20]);
        bell.push_with(1, SimTime(0), TaskExtra::None, |w| *w = wide);
        bell.drain(|_, _| {});
        // Into the same room: every word the wide entry left is stale under the new one.
        for (args, tiling) in [(&[5u64][..], &[7u32, 8, 9][..]), (&[][..], &[][..])] {
            let d = kernel(args, tiling);
            bell.push_with(2, SimTime(0), TaskExtra::None, |w| {
                w.encode_kernel(
                    KernelSlot {
                        index: 3,
                        generation: 2,
                    },
                    8,
                    args.iter().map(|&w| (w, w % 2 == 1)),
                    tiling,
                );
                w.pc = 0x8000_0000;
            });
            let mut back = Vec::new();
            bell.drain(|rung, _| back.push(rung.descriptor()));
            assert_eq!(bytemuck::bytes_of(&back[0]), bytemuck::bytes_of(&d));
        }
    }

    #[test]
    fn corrupt_counts_are_held_to_the_descriptors_room() {
        let mut bell = Doorbell::new();
        let mut d = kernel(&[1], &[2]);
        d.arg_count = u32::MAX;
        d.tiling_len = 1_000;
        bell.push_descriptor(1, SimTime(0), TaskExtra::None, &d);
        let back = bell.last().unwrap().descriptor();
        assert_eq!(bytemuck::bytes_of(&back), bytemuck::bytes_of(&d));
    }

    #[test]
    fn a_cleared_doorbell_keeps_its_memory() {
        let mut bell = Doorbell::new();
        for i in 0..100 {
            bell.push_descriptor(i + 1, SimTime(0), TaskExtra::None, &kernel(&[i], &[]));
        }
        let cap = bell.words.capacity();
        bell.drain(|_, _| {});
        for i in 0..100 {
            bell.push_descriptor(i + 1, SimTime(0), TaskExtra::None, &kernel(&[i], &[]));
        }
        assert_eq!(bell.words.capacity(), cap);
        bell.clear();
        assert!(bell.is_empty());
    }
}
