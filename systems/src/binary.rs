//! Running a binary kernel on the simulated AI cores. A launch of `block_dim` blocks on `cores`
//! cores runs each block on the RISC-V core (with its NPU extension) against the context's
//! address space; block `b` goes to core `b % cores`, and the launch lasts as long as the
//! busiest core's blocks plus the launch overhead. Binary kernels run when they are dispatched
//! (their cycle count *is* their duration), so their writes are visible from their start;
//! work ordered after them by stream order or events cannot tell.
//!
//! Every load and store the cores make goes through the context's TLB (`ContextBus`), which
//! also records it: the launch's access set becomes exactly the byte ranges its blocks touched.

use bevy_ecs::entity::Entity;
use npusim_components::access::{Access, AccessSet};
use npusim_components::binary::{BinaryCode, BlockStats, HostLog, LaunchStats};
use npusim_components::mode::{BinaryLog, BinaryRun};
use npusim_components::{DeviceMemory, DeviceState, NpuError, Task};
use npusim_device::config::DeviceConfig;
use npusim_device::core::npu::launch::{LaunchModel, SYNC_ALL_CYCLES};
use npusim_device::core::{
    Bus, Core, CoreConfig, Exit, Footprint, KernelArg, MemFault, NpuCsrs, RunStats, Trap,
};

/// The core's view of one context's memory: page-level protection through its TLB, and a
/// record of what was touched.
struct ContextBus<'a> {
    memory: &'a mut DeviceMemory,
    context: Entity,
    access: &'a mut AccessSet,
}

impl Bus for ContextBus<'_> {
    #[inline]
    fn load(&mut self, va: u64, buf: &mut [u8]) -> Result<(), MemFault> {
        self.memory
            .read_virt(self.context, va, buf)
            .map_err(|_| MemFault::unmapped(va))?;
        self.access.record(Access::read(va, buf.len() as u64));
        Ok(())
    }

    #[inline]
    fn store(&mut self, va: u64, data: &[u8]) -> Result<(), MemFault> {
        self.memory
            .write_virt(self.context, va, data)
            .map_err(|_| MemFault::unmapped(va))?;
        self.access.record(Access::write(va, data.len() as u64));
        Ok(())
    }
}

/// Reusable cores (their local buffers are large; building one per launch would dominate).
/// A launch takes one; a launch whose blocks meet at `sync_all` takes one per waiting block.
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

/// A block stopped at a `sync_all` for `count` blocks (0: all of the launch's), on its core.
struct Parked {
    block: u32,
    count: u32,
    core: Box<Core>,
}

/// Checks that the blocks parked at the end of a round make up one `sync_all` that can be
/// released: they agree on how many blocks it is for, that many are waiting, and each has a
/// core of its own. Anything else would hang on hardware; here it fails the launch, naming
/// the blocks.
fn sync_all_release(
    kernel: &str,
    block_dim: u32,
    cores: u32,
    parked: &[Parked],
) -> Result<(), NpuError> {
    let fail = |detail: String| NpuError::AicoreTrap {
        kernel: kernel.to_string(),
        detail,
    };
    let want = |count: u32| if count == 0 { block_dim } else { count };
    let first = &parked[0];
    if let Some(other) = parked.iter().find(|p| want(p.count) != want(first.count)) {
        return Err(fail(format!(
            "SyncAll: block {} waits for {} blocks but block {} for {}",
            first.block,
            want(first.count),
            other.block,
            want(other.count)
        )));
    }
    let n = want(first.count);
    if n > cores {
        return Err(fail(format!(
            "SyncAll across {n} blocks needs a core for each, and the launch has {cores}: the \
             blocks past the first {cores} would wait for a core held at the barrier (a hang \
             on hardware); launch at most {cores} blocks"
        )));
    }
    if parked.len() as u32 != n {
        let waiting: Vec<String> = parked.iter().take(8).map(|p| p.block.to_string()).collect();
        let more = if parked.len() > 8 { ", …" } else { "" };
        return Err(fail(format!(
            "SyncAll for {n} blocks: {} reached it (blocks {}{more}) and the others returned \
             without it, so it can never be released (a hang on hardware)",
            parked.len(),
            waiting.join(", ")
        )));
    }
    Ok(())
}

/// The error a trap fails its task with.
pub fn trap_error(kernel: &str, block: u32, trap: &Trap) -> NpuError {
    let kernel = kernel.to_string();
    let detail = format!("block {block}: {trap}");
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

/// The cores a launch of `block_dim` blocks of `code` spreads over, given `cores` free: a
/// vector-only kernel runs on the AI cores' vector (AIV) cores where the device has them.
fn launch_cores(config: &DeviceConfig, code: &BinaryCode, cores: u32, block_dim: u32) -> u32 {
    let vector_only = config.vector_cores_per_ai_core > 0
        && npusim_device::core::npu::launch::is_vector_only(&code.program);
    npusim_device::core::npu::launch::launch_cores(config, cores, vector_only).clamp(1, block_dim)
}

/// A timing-only binary launch priced from what it did when recorded (`run`), on this
/// device's preset: its clock, cores and HBM bandwidth. Its recorded pages are translated as
/// running it would (the TLB and driver counters match a functional run). Returns its
/// duration in nanoseconds.
pub fn price_recorded(
    device: &mut DeviceState,
    task: &Task,
    code: &BinaryCode,
    cores: u32,
    run: &BinaryRun,
) -> u64 {
    let config = &device.config;
    let block_dim = task.desc.block_dim.max(1);
    let model = LaunchModel {
        cores: launch_cores(config, code, cores, block_dim),
        ..LaunchModel::from_device(config)
    };
    let cycles = model.cycles_from(&run.block_cycles, run.hbm_bytes);
    let ns =
        (cycles as u128 * 1_000_000_000u128).div_ceil(config.core_clock_hz.max(1) as u128) as u64;
    let launch_ns = config.kernel_launch_ns;
    for &(addr, bytes) in &run.access {
        // A range that would fault was the recorded run's fault: not modelled here.
        let _ = device.memory.translate_virt(task.context, addr, bytes);
    }
    launch_ns + ns.max(1)
}

/// Runs every block of a binary kernel launch of `task`; returns its simulated duration in
/// nanoseconds and its outcome, and leaves in `task.access` the byte ranges the blocks touched.
/// Debug prints go to `log`; a recording runtime's `binary_log` gets what the blocks did.
#[allow(clippy::too_many_arguments)]
pub fn run_binary(
    cache: &mut CoreCache,
    device: &mut DeviceState,
    task: &mut Task,
    name: &str,
    code: &BinaryCode,
    cores: u32,
    log: &mut HostLog,
    binary_log: Option<&BinaryLog>,
) -> (u64, Result<(), NpuError>) {
    let config = device.config.clone();
    let context = task.context;
    let desc = &task.desc;
    let args: Vec<KernelArg> = desc
        .arg_words()
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            if desc.arg_is_float(i) {
                KernelArg::F32(f32::from_bits(w as u32))
            } else {
                KernelArg::Int(w)
            }
        })
        .collect();
    let block_dim = desc.block_dim.max(1);
    let cores = launch_cores(&config, code, cores, block_dim);
    // An op launch's tiling words start with the frame's header; the kernel gets its own.
    let skip = if task.extra.op().is_some() {
        npusim_components::shape::tiling_word::OP as u64 * 4
    } else {
        0
    };
    let words = desc.tiling_words();
    let tiling = if !words.is_empty() {
        match device.memory.write_tiling(context, words) {
            Ok(a) => a + skip,
            Err(e) => return (config.kernel_launch_ns, Err(e)),
        }
    } else {
        0
    };
    task.access.clear();
    let (mut limits, started) = (device.limits.clone(), std::time::Instant::now());
    // A launch's own timeout (`ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT`) replaces the device's.
    if let Some(t) = desc.timeout() {
        limits.kernel_timeout = t;
    }
    let mut bus = ContextBus {
        memory: &mut device.memory,
        context,
        access: &mut task.access,
    };
    let mut launch = LaunchStats {
        kernel: name.to_string(),
        blocks: Vec::with_capacity(block_dim as usize),
        ..LaunchStats::default()
    };
    // Blocks run one after another on one core. A block that stops at a `sync_all` keeps its
    // core (parked) and the next block takes another; once every block of the round has run,
    // the parked ones go on from the cycle the last of them arrived, plus the barrier's cost.
    let mut finished: Vec<Option<(RunStats, Footprint)>> = vec![None; block_dim as usize];
    let mut round: Vec<(u32, Option<Box<Core>>)> = (0..block_dim).map(|b| (b, None)).collect();
    let mut parked: Vec<Parked> = Vec::new();
    let mut spare = Some(cache.take(&config));
    let mut outcome = Ok(());
    'rounds: loop {
        let mut blocks = std::mem::take(&mut round).into_iter();
        for (block, resumed) in blocks.by_ref() {
            let resume = resumed.is_some();
            let mut core = match resumed.or_else(|| spare.take()) {
                Some(c) => c,
                None => cache.take(&config),
            };
            let result = if resume {
                crate::watchdog::continue_block(
                    &mut core,
                    &code.program,
                    &mut bus,
                    &limits,
                    config.core_clock_hz,
                    started,
                )
            } else {
                let csrs = NpuCsrs {
                    block_idx: block as u64,
                    block_dim: block_dim as u64,
                    core_id: (block % cores) as u64,
                    tiling,
                };
                crate::watchdog::run_block(
                    &mut core,
                    &code.program,
                    code.entry,
                    &args,
                    csrs,
                    &mut bus,
                    &limits,
                    config.core_clock_hz,
                    started,
                )
            };
            for line in core.take_output() {
                log.lines.push(format!("[{name} block {block}] {line}"));
            }
            match result {
                Ok(Exit::SyncAll(count)) => parked.push(Parked { block, count, core }),
                other => {
                    finished[block as usize] = Some((core.stats(), core.footprint().clone()));
                    match spare {
                        None => spare = Some(core),
                        Some(_) => cache.put(core),
                    }
                    if let Err(trap) = other {
                        outcome = Err(trap_error(name, block, &trap));
                        round = blocks.collect();
                        break 'rounds;
                    }
                }
            }
        }
        if parked.is_empty() {
            break;
        }
        if let Err(e) = sync_all_release(name, block_dim, cores, &parked) {
            outcome = Err(e);
            break;
        }
        let at = parked
            .iter()
            .map(|p| p.core.stats().cycles)
            .max()
            .unwrap_or(0)
            + SYNC_ALL_CYCLES;
        for mut p in parked.drain(..) {
            p.core.resume_at(at);
            round.push((p.block, Some(p.core)));
        }
    }
    // A launch that failed leaves its other blocks where they stopped; they count as far as
    // they ran.
    let stopped = parked.drain(..).map(|p| (p.block, p.core));
    let stopped = stopped.chain(round.drain(..).filter_map(|(b, c)| Some((b, c?))));
    for (block, core) in stopped {
        finished[block as usize] = Some((core.stats(), core.footprint().clone()));
        cache.put(core);
    }
    if let Some(core) = spare {
        cache.put(core);
    }
    let per_block: Vec<(RunStats, Footprint)> = finished.into_iter().flatten().collect();
    for (i, (stats, _)) in per_block.iter().enumerate() {
        launch.blocks.push(BlockStats {
            instructions: stats.instructions,
            cycles: stats.block_cycles.max(stats.cycles),
            core: i as u32 % cores,
        });
    }
    task.access.normalize();
    // The busiest core's blocks, or the launch's distinct HBM traffic at the HBM bandwidth,
    // whichever takes longer.
    let model = LaunchModel {
        cores,
        ..LaunchModel::from_device(&config)
    };
    let estimate = model.estimate(per_block.iter().map(|(s, f)| (s, f)));
    let cycles = estimate.cycles;
    launch.pipe_busy = estimate.pipe_busy;
    launch.cycles = cycles;
    launch.hbm_floor_cycles = estimate.hbm_floor_cycles;
    launch.hbm_bytes = estimate.hbm_bytes;
    launch.cores = cores;
    launch.clock_hz = config.core_clock_hz;
    if let Some(sink) = binary_log {
        let run = BinaryRun {
            block_cycles: per_block.iter().map(|(s, _)| s.block_cycles).collect(),
            hbm_bytes: estimate.hbm_bytes,
            access: task
                .access
                .ranges()
                .iter()
                .map(|a| (a.addr, a.bytes))
                .collect(),
        };
        sink.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((task.stream, task.seq, run));
    }
    if log.launches.len() == HostLog::MAX_LAUNCHES {
        log.launches.pop_front();
    }
    log.launches.push_back(launch);
    let ns =
        (cycles as u128 * 1_000_000_000u128).div_ceil(config.core_clock_hz.max(1) as u128) as u64;
    // The timeout is the launch's, not one block's: blocks sharing a core add up. A kernel
    // stopped by it ends at the timeout, as the hardware stops it then.
    let ns = match &mut outcome {
        Err(NpuError::AicoreTimeout { detail, .. }) => {
            *detail = crate::watchdog::describe(&limits, started, detail);
            ns.min(limits.kernel_timeout.as_ns())
        }
        _ => ns,
    };
    if outcome.is_ok() && ns > limits.kernel_timeout.as_ns() {
        outcome = Err(NpuError::AicoreTimeout {
            kernel: name.to_string(),
            detail: format!(
                "ran {ns} ns, past the {} ns kernel timeout",
                limits.kernel_timeout.as_ns()
            ),
        });
    }
    (config.kernel_launch_ns + ns.max(1), outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parked(blocks: &[(u32, u32)]) -> Vec<Parked> {
        blocks
            .iter()
            .map(|&(block, count)| Parked {
                block,
                count,
                core: Box::new(Core::new(CoreConfig::default())),
            })
            .collect()
    }

    #[test]
    fn a_sync_all_is_released_only_when_every_block_it_is_for_waits_on_its_own_core() {
        let all = parked(&[(0, 0), (1, 0), (2, 0)]);
        assert!(sync_all_release("k", 3, 3, &all).is_ok());
        // usedCores = 2 of 4 blocks: the first two meet, the others returned.
        assert!(sync_all_release("k", 4, 4, &parked(&[(0, 2), (1, 2)])).is_ok());
        let why = |r: Result<(), NpuError>| r.unwrap_err().to_string();
        let e = why(sync_all_release("k", 3, 3, &parked(&[(1, 0), (2, 0)])));
        assert!(
            e.contains("SyncAll for 3 blocks: 2 reached it (blocks 1, 2)"),
            "{e}"
        );
        let e = why(sync_all_release("k", 4, 2, &all));
        assert!(e.contains("across 4 blocks needs a core for each, and the launch has 2"));
        let e = why(sync_all_release("k", 4, 4, &parked(&[(0, 2), (1, 0)])));
        assert!(
            e.contains("block 0 waits for 2 blocks but block 1 for 4"),
            "{e}"
        );
    }
}
