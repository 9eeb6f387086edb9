//! The device entity: its datasheet, its execution units and its memory.

use bevy_ecs::component::Component;
use bevy_ecs::entity::Entity;
use npusim_device::config::DeviceConfig;

use crate::memory::DeviceMemory;

/// Free execution units of a device and how long each kind has been busy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Units {
    /// AI cores not running a kernel.
    pub free_cores: u32,
    /// DMA engines not running a copy.
    pub free_dma: u32,
    /// Sum over cores of simulated nanoseconds spent running kernels.
    pub core_busy_ns: u64,
    /// Sum over DMA engines of simulated nanoseconds spent copying.
    pub dma_busy_ns: u64,
}

/// One simulated NPU.
#[derive(Component, Debug)]
pub struct DeviceState {
    /// Index of the device in the runtime (0-based, as `aclrtSetDevice` numbers them).
    pub index: u32,
    /// Its datasheet.
    pub config: DeviceConfig,
    /// Its execution units.
    pub units: Units,
    /// Its memory.
    pub memory: DeviceMemory,
    /// The context `set_device` makes current (the primary context).
    pub default_context: Entity,
    /// The limits set through the runtime (core cap, kernel timeout).
    pub limits: crate::limits::DeviceLimits,
}
