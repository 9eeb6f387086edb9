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
use npusim_components::binary::{BinaryCode, BlockStats, HostLog, KernelType, LaunchStats};
use npusim_components::mode::{BinaryLog, BinaryRun};
use npusim_components::{DeviceMemory, DeviceState, NpuError, Task};
use npusim_device::config::DeviceConfig;
use npusim_device::core::npu::launch::LaunchModel;
use npusim_device::core::{Bus, Footprint, KernelArg, MemFault, RunStats};

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

mod blocks;

pub use blocks::{CoreCache, Slot, trap_error};

/// The cores a launch of `block_dim` blocks of `code` spreads over, given `cores` free: a
/// vector-only kernel runs on the AI cores' vector (AIV) cores where the device has them.
fn launch_cores(config: &DeviceConfig, code: &BinaryCode, cores: u32, block_dim: u32) -> u32 {
    // A split mix kernel's blocks are AI cores, whatever its code.
    let vector_only = config.vector_cores_per_ai_core > 0
        && code.kind == KernelType::Whole
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
        group: blocks::group_size(code.kind) as u32,
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
            Err(e) => return (config.kernel_launch_ns, Err(e.into())),
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
    let (slots, group) = blocks::layout(code.kind, block_dim, cores, tiling);
    let ran = blocks::run_blocks(
        name,
        &slots,
        group,
        cores,
        cache,
        &config,
        |core, slot, start| {
            let result = if start {
                crate::watchdog::run_block(
                    core,
                    &code.program,
                    code.entry,
                    &args,
                    slots[slot].csrs,
                    &mut bus,
                    &limits,
                    config.core_clock_hz,
                    started,
                )
            } else {
                crate::watchdog::continue_block(
                    core,
                    &code.program,
                    &mut bus,
                    &limits,
                    config.core_clock_hz,
                    started,
                )
            };
            let label = slots[slot].label();
            for line in core.take_output() {
                log.lines.push(format!("[{name} {label}] {line}"));
            }
            result
        },
    );
    let mut outcome = ran.outcome;
    let per_block: Vec<(RunStats, Footprint)> = ran.blocks.into_iter().flatten().collect();
    for (slot, (stats, _)) in slots.iter().zip(&per_block) {
        launch.blocks.push(BlockStats {
            instructions: stats.instructions,
            cycles: stats.block_cycles.max(stats.cycles),
            core: slot.csrs.core_id as u32,
        });
    }
    task.access.normalize();
    // The busiest core's blocks, or the launch's distinct HBM traffic at the HBM bandwidth,
    // whichever takes longer.
    let model = LaunchModel {
        cores,
        group: group as u32,
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
