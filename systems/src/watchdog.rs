//! The kernel watchdog: how long one block of a binary kernel may run. The limit is the
//! device's kernel timeout in *simulated* time (its cycles at the core clock), as an AI core's
//! hardware timeout is; a wall-clock guard, far above what honest kernels need, stops a runaway
//! loop that would otherwise keep the host busy for the whole simulated timeout. The block runs
//! in chunks of instructions so both limits are checked as it goes.

use std::time::Instant;

use npusim_components::limits::DeviceLimits;
use npusim_device::core::{Bus, Core, KernelArg, NpuCsrs, Program, RunStats, Trap};

/// Instructions run between two checks of the limits.
const CHUNK: u64 = 8_000_000;

/// Runs one block as [`Core::run`] does, stopping it with [`Trap::BudgetExceeded`] once its
/// cycles pass the device's kernel timeout or the launch's wall-clock time (since `started`)
/// passes the wall guard.
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
) -> Result<RunStats, Trap> {
    let max_cycles = limits.timeout_cycles(clock_hz).max(1);
    // Every instruction costs at least a cycle, so the cycles left bound the instructions.
    let budget = |core: &Core| CHUNK.min(max_cycles.saturating_sub(core.stats().cycles));
    let first = CHUNK.min(max_cycles);
    let mut result = core.run(program, entry, args, csrs, bus, first);
    loop {
        match result {
            Err(Trap::BudgetExceeded { pc, .. }) => {
                let stats = core.stats();
                let wall = limits.kernel_wall_limit;
                let out_of_time = stats.cycles >= max_cycles;
                let runaway = !wall.is_zero() && started.elapsed() >= wall;
                let next = budget(core);
                if out_of_time || runaway || next == 0 {
                    return Err(Trap::BudgetExceeded {
                        pc,
                        budget: stats.instructions,
                    });
                }
                result = core.execute(program, bus, next).map(|_| core.stats());
            }
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
             loop? NPUSIM_KERNEL_WALL_LIMIT / Runtime::set_kernel_wall_limit raise it)"
        )
    } else {
        format!(
            "{at}: ran past the kernel timeout of {} simulated{pc}",
            limits.kernel_timeout
        )
    }
}
