//! Loaded kernel binaries: the entity that owns a binary's instruction memory and module data,
//! and the code a binary kernel's launches run on the simulated AI core.

use std::sync::Arc;

use bevy_ecs::component::Component;
use bevy_ecs::entity::Entity;
use bevy_ecs::resource::Resource;
use npusim_device::core::Program;

/// What a binary kernel runs: the decoded program of its binary and its entry point.
#[derive(Debug)]
pub struct BinaryCode {
    /// The binary's decoded `.text` (decoded once, at load).
    pub program: Arc<Program>,
    /// The entry PC.
    pub entry: u64,
    /// The binary entity (checked live on launch).
    pub binary: Entity,
    /// The context whose address space holds the binary's data.
    pub context: Entity,
}

/// A loaded binary.
#[derive(Component, Debug)]
pub struct BinaryState {
    /// Owning context.
    pub context: Entity,
    /// The device entity.
    pub device: Entity,
    /// Where `.text` sits in instruction memory.
    pub text_base: u64,
    /// Bytes of `.text`.
    pub text_len: u64,
    /// Where the module data (`.rodata`, `.data`, `.bss`, …) is mapped, 0 when it has none.
    pub data_base: u64,
    /// Bytes of module data.
    pub data_len: u64,
    /// Exported functions and their entry PCs.
    pub functions: Vec<(String, u64)>,
    /// The decoded program.
    pub program: Arc<Program>,
}

/// What one block of a binary kernel did on its AI core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockStats {
    /// Instructions executed.
    pub instructions: u64,
    /// Cycles the block took (the later of the scalar unit and the pipes).
    pub cycles: u64,
    /// The AI core it ran on.
    pub core: u32,
}

/// One launch of a binary kernel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LaunchStats {
    /// The kernel's name.
    pub kernel: String,
    /// Per block, in block order (up to the first that trapped).
    pub blocks: Vec<BlockStats>,
    /// Busy cycles per pipe (scalar, vector, cube, MTE1–3), summed over blocks.
    pub pipe_busy: npusim_device::core::PipeCycles,
    /// The launch's cycles: the busiest core, or the HBM floor when memory bounds it.
    pub cycles: u64,
    /// Cycles the launch's distinct global-memory traffic needs at the HBM bandwidth.
    pub hbm_floor_cycles: u64,
    /// The launch's distinct global-memory bytes (reads plus writes).
    pub hbm_bytes: u64,
    /// The cores its blocks were spread over.
    pub cores: u32,
    /// The core clock of its device, in Hz (cycles to time).
    pub clock_hz: u64,
}

/// Lines kernels printed with the SDK's debug print (`ecall`), in the order they ran, and the
/// per-block counters of recent binary launches.
#[derive(Resource, Debug, Default)]
pub struct HostLog {
    /// The lines, each prefixed with the kernel and block that printed it.
    pub lines: Vec<String>,
    /// The most recent binary launches (at most [`HostLog::MAX_LAUNCHES`]).
    pub launches: std::collections::VecDeque<LaunchStats>,
}

impl HostLog {
    /// Launch records kept; older ones are dropped so long runs stay flat.
    pub const MAX_LAUNCHES: usize = 1024;
}
