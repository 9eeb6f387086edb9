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
    /// How the kernel's blocks map onto cube and vector cores.
    pub kind: KernelType,
}

/// How a binary kernel's blocks map onto an AI core's cube (AIC) and vector (AIV) cores, as its
/// `KERNEL_TASK_TYPE_DEFAULT` declares it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KernelType {
    /// Every block runs all of the kernel (any other declared type, or none).
    #[default]
    Whole,
    /// `KERNEL_TYPE_MIX_AIC_1_1` / `_1_2`: each of the launch's blocks is an AI core that runs
    /// one cube block and `vector_blocks` vector blocks of the kernel, which meet through
    /// cross-core flags.
    Mix {
        /// Vector blocks per cube block: 1 or 2.
        vector_blocks: u8,
    },
}

impl KernelType {
    /// The marker `KERNEL_TASK_TYPE_DEFAULT(type)` leaves in a kernel: a local object
    /// `npusim_kernel_type_<type>` inside the kernel function, whose symbol is
    /// `_ZZ<len><kernel>E<len>npusim_kernel_type_<type>`. Returns the kernel's name and the
    /// type it declares, or `None` for any other symbol.
    pub fn from_marker(symbol: &str) -> Option<(&str, KernelType)> {
        let rest = symbol.strip_prefix("_ZZ")?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let len: usize = rest[..digits].parse().ok()?;
        let kernel = rest.get(digits..digits + len)?;
        let tail = rest.get(digits + len..)?.strip_prefix('E')?;
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        let ty = tail[digits..].strip_prefix("npusim_kernel_type_")?;
        let kind = match ty {
            "KERNEL_TYPE_MIX_AIC_1_2" => KernelType::Mix { vector_blocks: 2 },
            "KERNEL_TYPE_MIX_AIC_1_1" => KernelType::Mix { vector_blocks: 1 },
            _ => KernelType::Whole,
        };
        Some((kernel, kind))
    }
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
    /// The kernels that declare a split [`KernelType`] (the rest run whole).
    pub kernel_types: Vec<(String, KernelType)>,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_type_marker_names_its_kernel_and_type() {
        let m = "_ZZ14baremix_customE42npusim_kernel_type_KERNEL_TYPE_MIX_AIC_1_2";
        assert_eq!(
            KernelType::from_marker(m),
            Some(("baremix_custom", KernelType::Mix { vector_blocks: 2 }))
        );
        let m = "_ZZ3fooE39npusim_kernel_type_KERNEL_TYPE_AIV_ONLY";
        assert_eq!(KernelType::from_marker(m), Some(("foo", KernelType::Whole)));
        for other in [
            "baremix_custom",
            "_ZZ3fooE4mark",
            "_ZZ99fooE",
            "_ZN3foo3barE",
        ] {
            assert_eq!(KernelType::from_marker(other), None, "{other}");
        }
    }
}
