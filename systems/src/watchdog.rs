//! The kernel watchdog: how long one block of a binary kernel may run. The limit is the
//! device's kernel timeout in *simulated* time (its cycles at the core clock), as an AI core's
//! hardware timeout is; a wall-clock guard, far above what honest kernels need, stops a runaway
//! loop that would otherwise keep the host busy for the whole simulated timeout. The block runs
//! in chunks of instructions so both limits are checked as it goes.

use std::time::Instant;

use npusim_components::limits::DeviceLimits;
use npusim_device::core::{Bus, Core, Exit, KernelArg, NpuCsrs, Program, Trap};

/// Instructions run between two checks of the limits.
const CHUNK: u64 = 8_000_000;

/// Runs one block as [`Core::run`] does, stopping it with [`Trap::BudgetExceeded`] once its
/// cycles pass the device's kernel timeout or the launch's wall-clock time (since `started`)
/// passes the wall guard. `Ok` says how it stopped: returned, or at a `sync_all`.
#[allow(clippy::too_many_arguments)]
pub fn run_block<B: Bus>(
    core: &mut Core,
    program: &Program,
    entry: u64,
    args: &[KernelArg],
    csrs: NpuCsrs,
    bus: &mut B,
    limits: &DeviceLimits,
    clock_hz: u64,
    started: Instant,
) -> Result<Exit, Trap> {
    core.start(entry, args, csrs)?;
    continue_block(core, program, bus, limits, clock_hz, started)
}

/// Goes on with a block from where it stopped (its start, or past a `sync_all`), under the
/// same limits as [`run_block`].
pub fn continue_block<B: Bus>(
    core: &mut Core,
    program: &Program,
    bus: &mut B,
    limits: &DeviceLimits,
    clock_hz: u64,
    started: Instant,
) -> Result<Exit, Trap> {
    let max_cycles = limits.timeout_cycles(clock_hz).max(1);
    let wall = limits.kernel_wall_limit;
    loop {
        // Every instruction costs at least a cycle, so the cycles left bound the instructions.
        let next = CHUNK.min(max_cycles.saturating_sub(core.stats().cycles));
        let runaway = !wall.is_zero() && started.elapsed() >= wall;
        if next == 0 || runaway {
            return Err(Trap::BudgetExceeded {
                pc: core.pc(),
                budget: core.stats().instructions,
            });
        }
        match core.execute(program, bus, next) {
            Err(Trap::BudgetExceeded { .. }) => {}
            other => return other,
        }
    }
}

/// What stopped a block that ran out of time, for its error: the wall-clock guard (if it has
/// passed since `started`) or the simulated timeout. `detail` names the block and pc.
pub fn describe(limits: &DeviceLimits, started: Instant, detail: &str) -> String {
    let wall = limits.kernel_wall_limit;
    let at = detail.split(": ").next().unwrap_or(detail);
    let pc = detail
        .rsplit_once(" at pc ")
        .map_or(String::new(), |(_, pc)| format!(" at pc {pc}"));
    if !wall.is_zero() && started.elapsed() >= wall {
        format!(
            "{at}: stopped by the wall-clock guard after {wall:?} of simulation{pc} (a runaway \
             loop? NPUSIM_KERNEL_WALL_LIMIT / Limits::set_kernel_wall_limit raise it)"
        )
    } else {
        format!(
            "{at}: ran past the kernel timeout of {} simulated{pc}",
            limits.kernel_timeout
        )
    }
}
