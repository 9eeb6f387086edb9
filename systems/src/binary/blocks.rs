//! A launch's blocks on the simulated cores, and how they wait for each other.
//!
//! The blocks run one after another, each until it returns or must wait for another block: at
//! a `sync_all` (until every block of the barrier has reached it) or at a cross-core flag wait
//! (until a set of the flag is counted for it). A waiting block keeps its core, with all its
//! state, and the next block runs on another; it goes on, from the simulated cycle its wait
//! was released, once that happens. Blocks start in launch order and resume in the order their
//! waits were released, so a launch's results and timeline are the same every run. A wait
//! nothing can release any more fails the launch, naming the blocks; on hardware it hangs.
//!
//! A kernel declared `KERNEL_TYPE_MIX_AIC_1_*` ([`KernelType::Mix`]) is split: each of the
//! launch's `block_dim` AI cores runs one cube (AIC) block and one or two vector (AIV) blocks,
//! [`Slot`]s here, laid out AI core by AI core; any other kernel has one slot per block.

use std::collections::{BTreeMap, VecDeque};

use npusim_components::NpuError;
use npusim_components::binary::KernelType;
use npusim_device::abi::{CORE_KIND_AIC, CORE_KIND_AIV, CORE_KIND_ANY};
use npusim_device::config::DeviceConfig;
use npusim_device::core::npu::launch::SYNC_ALL_CYCLES;
use npusim_device::core::npu::{CROSS_DEPTH, CROSS_FLAGS, CrossSet};
use npusim_device::core::{Core, CoreConfig, Exit, Footprint, NpuCsrs, RunStats, Trap};

/// Reusable cores (their local buffers are large; building one per launch would dominate).
/// A launch takes one; a launch whose blocks wait for each other takes one per waiting block.
#[derive(Default)]
pub struct CoreCache {
    /// The device preset the cores were built for, and the idle cores.
    cores: Option<(String, Vec<Box<Core>>)>,
}

impl CoreCache {
    /// Idle cores kept beyond the one every launch needs.
    const KEEP: usize = 8;

    /// An idle core for `config`'s device, or a new one.
    fn take(&mut self, config: &DeviceConfig) -> Box<Core> {
        match &mut self.cores {
            Some((name, idle)) if *name == config.name => idle.pop(),
            _ => {
                self.cores = Some((config.name.clone(), Vec::new()));
                None
            }
        }
        .unwrap_or_else(|| Box::new(Core::new(CoreConfig::from_device(config))))
    }

    /// Gives back a core [`CoreCache::take`] handed out.
    fn put(&mut self, core: Box<Core>) {
        if let Some((_, idle)) = &mut self.cores
            && idle.len() <= Self::KEEP
        {
            idle.push(core);
        }
    }
}

/// One block a launch runs: its launch registers and the AI core (group) it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// What the block reads from its CSRs.
    pub csrs: NpuCsrs,
    /// The AI core of a split kernel the block belongs to (its block index otherwise).
    pub group: u32,
}

impl Slot {
    /// The block as errors name it: `block 3`, or `AIC block 0` / `AIV block 1` in a split
    /// kernel.
    pub fn label(&self) -> String {
        match self.csrs.core_kind {
            CORE_KIND_AIC => format!("AIC block {}", self.csrs.block_idx),
            CORE_KIND_AIV => format!("AIV block {}", self.csrs.block_idx),
            _ => format!("block {}", self.csrs.block_idx),
        }
    }
}

/// How many blocks of a `kind` kernel run side by side on one AI core: 1, or a split
/// kernel's cube block and its vector blocks.
pub fn group_size(kind: KernelType) -> usize {
    match kind {
        KernelType::Whole => 1,
        KernelType::Mix { vector_blocks } => 1 + vector_blocks.max(1) as usize,
    }
}

/// The blocks of a launch of `block_dim` blocks of a `kind` kernel over `cores` cores, and how
/// many slots each group has ([`group_size`]).
pub fn layout(kind: KernelType, block_dim: u32, cores: u32, tiling: u64) -> (Vec<Slot>, usize) {
    let cores = cores.max(1);
    let base = NpuCsrs {
        block_dim: block_dim as u64,
        tiling,
        sub_block_num: 1,
        ..NpuCsrs::default()
    };
    match kind {
        KernelType::Whole => {
            let slots = (0..block_dim)
                .map(|b| Slot {
                    csrs: NpuCsrs {
                        block_idx: b as u64,
                        core_id: (b % cores) as u64,
                        core_kind: CORE_KIND_ANY,
                        ..base
                    },
                    group: b,
                })
                .collect();
            (slots, 1)
        }
        KernelType::Mix { .. } => {
            let group = group_size(kind);
            let v = group as u64 - 1;
            let mut slots = Vec::with_capacity(block_dim as usize * group);
            for g in 0..block_dim {
                let core_id = (g % cores) as u64;
                let part = |kind, idx, sub| Slot {
                    csrs: NpuCsrs {
                        block_idx: idx,
                        core_id,
                        core_kind: kind,
                        sub_block_idx: sub,
                        sub_block_num: v,
                        ..base
                    },
                    group: g,
                };
                slots.push(part(CORE_KIND_AIC, g as u64, 0));
                slots.extend((0..v).map(|s| part(CORE_KIND_AIV, g as u64 * v + s, s)));
            }
            (slots, group)
        }
    }
}

/// Why a block waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// At a `sync_all` for this many blocks (0: every block of its kind).
    Barrier(u32),
    /// For a set of this cross-core flag.
    Flag(u8),
}

/// A block that waits, on the core that holds its state.
struct Waiting {
    slot: usize,
    why: Wait,
    core: Box<Core>,
}

/// What a launch's blocks did: each one's counters and footprint (in slot order; `None` for a
/// block a failure kept from starting) and the first failure.
pub struct Ran {
    /// Per slot, what the block did as far as it ran.
    pub blocks: Vec<Option<(RunStats, Footprint)>>,
    /// The launch's outcome.
    pub outcome: Result<(), NpuError>,
}

/// The scheduler's state over one launch.
struct Blocks<'a> {
    kernel: &'a str,
    slots: &'a [Slot],
    /// Slots per group (AI core).
    group: usize,
    /// Cores the launch spreads over.
    cores: u32,
    /// Blocks to run (new ones start; resumed ones carry their core), in order.
    runnable: VecDeque<(usize, Option<Box<Core>>)>,
    waiting: Vec<Waiting>,
    /// Counted, unconsumed sets per slot and flag: the cycles they were released at.
    counts: Vec<VecDeque<u64>>,
    /// Sets gathered until every block they need has made one: (mode, kind or group, flag)
    /// to the cycles of the sets so far.
    gathered: BTreeMap<(u8, u64, u8), Vec<u64>>,
}

/// Runs the blocks of `slots` (laid out by [`layout`], `group` slots per AI core) to the end
/// or the first failure. `step(core, slot, start)` runs one block on `core` until it stops:
/// from its start when `start`, else from where it stopped.
pub fn run_blocks(
    kernel: &str,
    slots: &[Slot],
    group: usize,
    cores: u32,
    cache: &mut CoreCache,
    config: &DeviceConfig,
    mut step: impl FnMut(&mut Core, usize, bool) -> Result<Exit, Trap>,
) -> Ran {
    let mut s = Blocks {
        kernel,
        slots,
        group: group.max(1),
        cores: cores.max(1),
        runnable: (0..slots.len()).map(|i| (i, None)).collect(),
        waiting: Vec::new(),
        counts: vec![VecDeque::new(); slots.len() * CROSS_FLAGS],
        gathered: BTreeMap::new(),
    };
    let mut ran: Vec<Option<(RunStats, Footprint)>> = vec![None; slots.len()];
    let mut spare = None;
    let mut outcome = Ok(());
    let mut stopped: Vec<(usize, Box<Core>)> = Vec::new();
    while let Some((slot, resumed)) = s.runnable.pop_front() {
        let start = resumed.is_none();
        let mut core = match resumed.or_else(|| spare.take()) {
            Some(c) => c,
            None => cache.take(config),
        };
        let exit = step(&mut core, slot, start);
        let sets = core.take_cross_sets();
        let counted = sets.iter().try_for_each(|&set| s.count(slot, set));
        let exit = match (counted, exit) {
            (Err(e), _) => Err(e),
            (Ok(()), Ok(exit)) => Ok(exit),
            (Ok(()), Err(trap)) => Err(trap_error(kernel, &slots[slot], &trap)),
        };
        match exit {
            Ok(Exit::SyncAll(count)) => {
                s.waiting.push(Waiting {
                    slot,
                    why: Wait::Barrier(count),
                    core,
                });
                if let Err(e) = s.release_barrier(slot, count) {
                    outcome = Err(e);
                    break;
                }
            }
            Ok(Exit::CrossWait(flag)) => {
                match s.counts[slot * CROSS_FLAGS + flag as usize].pop_front() {
                    Some(at) => {
                        core.resume_at(at);
                        s.runnable.push_front((slot, Some(core)));
                    }
                    None => s.waiting.push(Waiting {
                        slot,
                        why: Wait::Flag(flag),
                        core,
                    }),
                }
            }
            Ok(_) => {
                ran[slot] = Some((core.stats(), core.footprint().clone()));
                match spare {
                    None => spare = Some(core),
                    Some(_) => cache.put(core),
                }
            }
            Err(e) => {
                stopped.push((slot, core));
                outcome = Err(e);
                break;
            }
        }
    }
    if outcome.is_ok() && !s.waiting.is_empty() {
        outcome = Err(s.stuck());
    }
    // A launch that failed leaves its other blocks where they stopped; they count as far as
    // they ran.
    stopped.extend(s.waiting.drain(..).map(|w| (w.slot, w.core)));
    stopped.extend(s.runnable.drain(..).filter_map(|(i, c)| Some((i, c?))));
    for (slot, core) in stopped {
        ran[slot] = Some((core.stats(), core.footprint().clone()));
        cache.put(core);
    }
    if let Some(core) = spare {
        cache.put(core);
    }
    Ran {
        blocks: ran,
        outcome,
    }
}

impl Blocks<'_> {
    fn fail(&self, detail: String) -> NpuError {
        NpuError::AicoreTrap {
            kernel: self.kernel.to_string(),
            detail,
        }
    }

    fn kind(&self, slot: usize) -> u64 {
        self.slots[slot].csrs.core_kind
    }

    /// The slots of one kind (every slot for a kernel that is not split).
    fn of_kind(&self, kind: u64) -> impl Iterator<Item = usize> + '_ {
        (0..self.slots.len()).filter(move |&i| self.kind(i) == kind)
    }

    /// The cube slot and the vector slots of `slot`'s AI core.
    fn group_of(&self, slot: usize) -> (usize, std::ops::Range<usize>) {
        let first = slot / self.group * self.group;
        (first, first + 1..first + self.group)
    }

    /// Counts a cross-core set `set` made by `slot` for the blocks its mode names, once every
    /// block the mode gathers has made it.
    fn count(&mut self, slot: usize, set: CrossSet) -> Result<(), NpuError> {
        let kind = self.kind(slot);
        let gather = |s: &mut Self, key: u64, need: usize| -> Option<u64> {
            let g = s.gathered.entry((set.mode, key, set.flag)).or_default();
            g.push(set.at);
            (g.len() >= need).then(|| {
                let at = g.iter().copied().max().unwrap_or(set.at);
                g.clear();
                at
            })
        };
        let targets: Vec<(usize, u64)> = match (set.mode, kind) {
            (0, _) => {
                let members: Vec<usize> = self.of_kind(kind).collect();
                match gather(self, kind, members.len()) {
                    Some(at) => members.into_iter().map(|m| (m, at)).collect(),
                    None => Vec::new(),
                }
            }
            // A block that runs all of its kernel is its own cube and vector block.
            (_, CORE_KIND_ANY) => vec![(slot, set.at)],
            (1, CORE_KIND_AIV) | (2, CORE_KIND_AIV) => {
                let (aic, aivs) = self.group_of(slot);
                let group = self.slots[slot].group as u64;
                match gather(self, group, aivs.len()) {
                    Some(at) if set.mode == 1 => aivs.map(|m| (m, at)).collect(),
                    Some(at) => vec![(aic, at)],
                    None => Vec::new(),
                }
            }
            (2, _) => {
                let (_, aivs) = self.group_of(slot);
                aivs.map(|m| (m, set.at)).collect()
            }
            _ => {
                return Err(self.fail(format!(
                    "CrossCoreSetFlag<{}>({}) on {}: mode 1 syncs the vector blocks of an AI \
                     core, and this is its cube block",
                    set.mode,
                    set.flag,
                    self.slots[slot].label()
                )));
            }
        };
        for (t, at) in targets {
            let waiting = self
                .waiting
                .iter()
                .position(|w| w.slot == t && w.why == Wait::Flag(set.flag));
            if let Some(i) = waiting {
                let mut w = self.waiting.remove(i);
                w.core.resume_at(at);
                self.runnable.push_back((t, Some(w.core)));
                continue;
            }
            let c = &mut self.counts[t * CROSS_FLAGS + set.flag as usize];
            if c.len() >= CROSS_DEPTH {
                return Err(self.fail(format!(
                    "cross-core flag {} of {}: {CROSS_DEPTH} sets are already counted and not \
                     waited for (its counter is full)",
                    set.flag,
                    self.slots[t].label()
                )));
            }
            c.push_back(at);
        }
        Ok(())
    }

    /// After `slot` reached a `sync_all` for `count` blocks: releases the barrier once every
    /// block it is for waits at it, or fails when it can never be.
    fn release_barrier(&mut self, slot: usize, count: u32) -> Result<(), NpuError> {
        let kind = self.kind(slot);
        let want = |count: u32| {
            if count == 0 {
                self.of_kind(kind).count()
            } else {
                count as usize
            }
        };
        let n = want(count);
        let at_barrier: Vec<(usize, u32)> = self
            .waiting
            .iter()
            .filter_map(|w| match w.why {
                Wait::Barrier(c) if self.kind(w.slot) == kind => Some((w.slot, c)),
                _ => None,
            })
            .collect();
        if let Some(&(other, c)) = at_barrier.iter().find(|&&(_, c)| want(c) != n) {
            return Err(self.fail(format!(
                "SyncAll: {} waits for {n} blocks but {} for {}",
                self.slots[slot].label(),
                self.slots[other].label(),
                want(c)
            )));
        }
        // Each block of a barrier needs an AI core of its own (a split kernel's AI core runs
        // its blocks together).
        let needed = if self.group > 1 {
            self.slots.len() / self.group
        } else {
            n
        };
        if needed > self.cores as usize {
            return Err(self.fail(format!(
                "SyncAll across {needed} blocks needs a core for each, and the launch has {}: \
                 the blocks past the first {} would wait for a core held at the barrier (a hang \
                 on hardware); launch at most {} blocks",
                self.cores, self.cores, self.cores
            )));
        }
        if at_barrier.len() < n {
            return Ok(());
        }
        let mut released = Vec::with_capacity(n);
        let mut i = 0;
        while i < self.waiting.len() {
            let w = &self.waiting[i];
            if matches!(w.why, Wait::Barrier(_)) && self.kind(w.slot) == kind {
                released.push(self.waiting.remove(i));
            } else {
                i += 1;
            }
        }
        released.sort_by_key(|w| w.slot);
        let at = released
            .iter()
            .map(|w| w.core.stats().cycles)
            .max()
            .unwrap_or(0)
            + SYNC_ALL_CYCLES;
        for mut w in released {
            w.core.resume_at(at);
            self.runnable.push_back((w.slot, Some(w.core)));
        }
        Ok(())
    }

    /// The error for blocks left waiting when nothing can run any more.
    fn stuck(&self) -> NpuError {
        let labels = |f: &dyn Fn(&Wait) -> bool| -> Vec<String> {
            let mut v: Vec<&Waiting> = self.waiting.iter().filter(|w| f(&w.why)).collect();
            v.sort_by_key(|w| w.slot);
            v.iter().map(|w| self.slots[w.slot].label()).collect()
        };
        let list = |v: &[String]| {
            let shown = v.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
            if v.len() > 8 {
                format!("{shown}, …")
            } else {
                shown
            }
        };
        let flags = labels(&|w| matches!(w, Wait::Flag(_)));
        if let Some(w) = self.waiting.iter().find(|w| matches!(w.why, Wait::Flag(_))) {
            let Wait::Flag(flag) = w.why else {
                unreachable!("matched")
            };
            return self.fail(format!(
                "CrossCoreWaitFlag({flag}) on {} can never be released: no block that is still \
                 running sets it (waiting for a cross-core flag: {}; a hang on hardware)",
                self.slots[w.slot].label(),
                list(&flags)
            ));
        }
        let at = labels(&|w| matches!(w, Wait::Barrier(_)));
        let n = match self.waiting[0].why {
            Wait::Barrier(0) => self.of_kind(self.kind(self.waiting[0].slot)).count(),
            Wait::Barrier(c) => c as usize,
            Wait::Flag(_) => 0,
        };
        self.fail(format!(
            "SyncAll for {n} blocks: {} reached it ({}) and the others returned without it, so \
             it can never be released (a hang on hardware)",
            at.len(),
            list(&at)
        ))
    }
}

/// The error a trap of `slot` fails its task with.
pub fn trap_error(kernel: &str, slot: &Slot, trap: &Trap) -> NpuError {
    let kernel = kernel.to_string();
    let detail = format!("{}: {trap}", slot.label());
    match trap {
        Trap::BudgetExceeded { .. } => NpuError::AicoreTimeout { kernel, detail },
        Trap::LoadPageFault { .. }
        | Trap::StorePageFault { .. }
        | Trap::LoadMisaligned { .. }
        | Trap::StoreMisaligned { .. }
        | Trap::InstructionPageFault { .. }
        | Trap::InstructionMisaligned { .. } => NpuError::AicoreException { kernel, detail },
        _ => NpuError::AicoreTrap { kernel, detail },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_kernel_lays_out_a_cube_block_and_its_vector_blocks_per_ai_core() {
        let (slots, group) = layout(KernelType::Mix { vector_blocks: 2 }, 2, 24, 0x40);
        assert_eq!(group, 3);
        let row: Vec<(u64, u64, u64, u64, u32)> = slots
            .iter()
            .map(|s| {
                let c = s.csrs;
                (
                    c.core_kind,
                    c.block_idx,
                    c.sub_block_idx,
                    c.core_id,
                    s.group,
                )
            })
            .collect();
        assert_eq!(
            row,
            [
                (CORE_KIND_AIC, 0, 0, 0, 0),
                (CORE_KIND_AIV, 0, 0, 0, 0),
                (CORE_KIND_AIV, 1, 1, 0, 0),
                (CORE_KIND_AIC, 1, 0, 1, 1),
                (CORE_KIND_AIV, 2, 0, 1, 1),
                (CORE_KIND_AIV, 3, 1, 1, 1),
            ]
        );
        assert!(
            slots
                .iter()
                .all(|s| s.csrs.block_dim == 2 && s.csrs.tiling == 0x40)
        );
        assert_eq!(slots[4].label(), "AIV block 2");
        // A kernel that is not split: one slot per block, blocks round-robin over the cores.
        let (slots, group) = layout(KernelType::Whole, 5, 2, 0);
        assert_eq!(group, 1);
        let cores: Vec<u64> = slots.iter().map(|s| s.csrs.core_id).collect();
        assert_eq!(cores, [0, 1, 0, 1, 0]);
        assert_eq!(slots[3].label(), "block 3");
    }

    /// Runs `slots` with a scripted step: each call to a slot returns that slot's next exit.
    fn scripted(slots: &[Slot], group: usize, cores: u32, script: Vec<Vec<Exit>>) -> Ran {
        let mut script: Vec<VecDeque<Exit>> = script.into_iter().map(Into::into).collect();
        let mut starts = Vec::new();
        let ran = run_blocks(
            "k",
            slots,
            group,
            cores,
            &mut CoreCache::default(),
            &DeviceConfig::small(),
            |_, slot, start| {
                starts.push((slot, start));
                Ok(script[slot].pop_front().unwrap_or(Exit::Returned))
            },
        );
        // Each block starts once, and every later step of it resumes it.
        let mut first = vec![true; slots.len()];
        for (slot, start) in starts {
            assert_eq!(start, std::mem::take(&mut first[slot]), "slot {slot}");
        }
        ran
    }

    #[test]
    fn blocks_at_a_barrier_go_on_once_the_last_arrives_and_a_skipped_barrier_fails() {
        let (slots, _) = layout(KernelType::Whole, 3, 3, 0);
        let all = vec![vec![Exit::SyncAll(0), Exit::SyncAll(0)]; 3];
        let ran = scripted(&slots, 1, 3, all);
        assert!(ran.outcome.is_ok(), "{:?}", ran.outcome);
        assert!(ran.blocks.iter().all(Option::is_some));
        // Block 2 returns without the barrier blocks 0 and 1 wait at.
        let skip = vec![vec![Exit::SyncAll(0)], vec![Exit::SyncAll(0)], vec![]];
        let e = scripted(&slots, 1, 3, skip)
            .outcome
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("SyncAll for 3 blocks: 2 reached it (block 0, block 1)"),
            "{e}"
        );
        // Three blocks on two cores could never all be at the barrier at once.
        let e = scripted(&slots, 1, 2, vec![vec![Exit::SyncAll(0)]; 3]);
        let e = e.outcome.unwrap_err().to_string();
        assert!(
            e.contains("needs a core for each, and the launch has 2"),
            "{e}"
        );
    }

    #[test]
    fn a_flag_wait_no_block_can_release_fails_naming_the_waiting_blocks() {
        let (slots, group) = layout(KernelType::Mix { vector_blocks: 2 }, 1, 1, 0);
        let script = vec![vec![], vec![Exit::CrossWait(4)], vec![Exit::CrossWait(4)]];
        let ran = scripted(&slots, group, 1, script);
        let e = ran.outcome.unwrap_err().to_string();
        assert!(
            e.contains("CrossCoreWaitFlag(4) on AIV block 0 can never be released"),
            "{e}"
        );
        assert!(e.contains("AIV block 0, AIV block 1"), "{e}");
        // The waiting blocks count as far as they ran.
        assert!(ran.blocks.iter().all(Option::is_some));
    }
}
