//! [`NpuDevice`]: a device of the runtime as a value — its datasheet, limits, memory, how busy
//! its units have been, and its contexts (cudarc's `CudaContext` per ordinal, split here into
//! the device and its contexts, as ACL has them).

use bevy_ecs::entity::Entity;
use npusim_components::limits::DeviceLimits;
use npusim_components::{Context, ContextState, DeviceState, NpuResult, Units};

use super::NpuContext;
use crate::runtime::device_entity;
use crate::{DeviceConfig, Runtime};

/// A device of a runtime (`rt.device(i)`): an index and a runtime handle, checked when made.
/// Cheap to clone, `Send + Sync`; dropping it does nothing.
///
/// ```
/// use npusim_engine::prelude::*;
///
/// let rt = Runtime::new(RuntimeConfig { devices: 2, ..RuntimeConfig::default() })?;
/// let dev = rt.device(1)?;
/// let ctx = dev.context()?;
/// let before = dev.memory_info()?;
/// let buf = ctx.alloc::<f32>(1 << 20)?;
/// let after = dev.memory_info()?;
/// assert_eq!(after.total, dev.config()?.hbm_bytes);
/// assert!(before.free - after.free >= buf.byte_len());
/// assert!(rt.device(2).is_err(), "two devices: 0 and 1");
/// # Ok::<(), NpuError>(())
/// ```
#[derive(Clone)]
pub struct NpuDevice {
    rt: Runtime,
    index: u32,
}

impl std::fmt::Debug for NpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NpuDevice({})", self.index)
    }
}

/// Free and total bytes of a device's memory (`aclrtGetMemInfo`, `cudaMemGetInfo`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Bytes not in live allocations.
    pub free: u64,
    /// The device's memory (its datasheet's HBM).
    pub total: u64,
}

/// How busy a device's units have been, from the start of the simulation to the device clock's
/// present.
#[derive(Clone, Debug, PartialEq)]
pub struct Utilisation {
    /// The units' counters: free units now, busy time so far.
    pub units: Units,
    /// Fraction of AI-core time spent running kernels (0 to 1; 0 before any time has passed).
    pub cores: f64,
    /// Fraction of DMA-engine time spent copying (0 to 1).
    pub dma: f64,
}

impl Runtime {
    /// Device `index` (`0..device_count()`), as a value.
    pub fn device(&self, index: u32) -> NpuResult<NpuDevice> {
        device_entity(&self.lock().world, index)?;
        Ok(NpuDevice {
            rt: self.clone(),
            index,
        })
    }

    /// Every device, in index order.
    pub fn devices(&self) -> Vec<NpuDevice> {
        (0..self.device_count())
            .map(|index| NpuDevice {
                rt: self.clone(),
                index,
            })
            .collect()
    }
}

impl NpuDevice {
    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The device's index (as `aclrtSetDevice` numbers it).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The device's datasheet.
    pub fn config(&self) -> NpuResult<DeviceConfig> {
        self.rt.device_config(self.index)
    }

    /// The limits set on it ([`Limits::set_core_limits`](crate::Limits::set_core_limits), [`Limits::set_kernel_timeout`](crate::Limits::set_kernel_timeout)).
    pub fn limits(&self) -> NpuResult<DeviceLimits> {
        self.rt.limits().device(self.index)
    }

    /// Free and total bytes of its memory, over all its contexts.
    pub fn memory_info(&self) -> NpuResult<MemoryInfo> {
        let g = self.rt.lock();
        let d = self.state(&g.world)?;
        let total = d.config.hbm_bytes;
        Ok(MemoryInfo {
            free: total.saturating_sub(d.memory.live_bytes()),
            total,
        })
    }

    /// How busy its AI cores and DMA engines have been.
    pub fn utilisation(&self) -> NpuResult<Utilisation> {
        let now = self.rt.device_now().0;
        let g = self.rt.lock();
        let d = self.state(&g.world)?;
        let fraction = |busy: u64, units: u32| {
            let capacity = now as f64 * units as f64;
            if capacity > 0.0 {
                (busy as f64 / capacity).min(1.0)
            } else {
                0.0
            }
        };
        Ok(Utilisation {
            cores: fraction(d.units.core_busy_ns, d.config.ai_cores),
            dma: fraction(d.units.dma_busy_ns, d.config.dma_engines),
            units: d.units.clone(),
        })
    }

    /// Its primary context (the one `aclrtSetDevice` makes current), never destroyed by a drop.
    pub fn context(&self) -> NpuResult<NpuContext> {
        self.rt.device_context(self.index)
    }

    /// A new context on it, destroyed with the last object made from it
    /// ([`Runtime::new_context`]).
    pub fn new_context(&self) -> NpuResult<NpuContext> {
        self.rt.new_context(self.index)
    }

    /// Every live context on it, primary first, then the others in entity order. Dropping
    /// these views destroys nothing.
    pub fn contexts(&self) -> NpuResult<Vec<NpuContext>> {
        let handles: Vec<Context> = {
            let mut g = self.rt.lock();
            let primary = self.state(&g.world)?.default_context;
            let world = &mut g.world;
            let mut others: Vec<Entity> = world
                .query::<(Entity, &ContextState)>()
                .iter(world)
                .filter(|(e, c)| c.device_index == self.index && *e != primary)
                .map(|(e, _)| e)
                .collect();
            others.sort();
            std::iter::once(primary)
                .chain(others)
                .map(|e| Context::new(self.rt.id(), e))
                .collect()
        };
        handles.into_iter().map(|c| self.rt.context_of(c)).collect()
    }

    /// Waits for every stream of the device to finish its queued work; returns the first error
    /// of its primary context ([`Runtime::synchronize_device`]).
    #[track_caller]
    pub fn synchronize(&self) -> NpuResult<()> {
        let _site = crate::sanitizer::SiteGuard::here();
        self.context()?.synchronize()
    }

    fn state<'w>(&self, world: &'w bevy_ecs::world::World) -> NpuResult<&'w DeviceState> {
        let e = device_entity(world, self.index)?;
        Ok(world.get::<DeviceState>(e).expect("device entity"))
    }
}
