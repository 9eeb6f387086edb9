//! Shape handles: slots in a context's shape buffer, which lives in that context's device
//! memory and is allocated with its first handle. Also the host's view of the dynamic-shape
//! stages: their counters and the record of tiling decisions.

use bevy_ecs::prelude::*;
use npusim_components::shape::{
    SLOT_BYTES, Shape, ShapeBuffer, ShapeHandle, ShapeSlot, ShapeStats, TilingLog, TilingRecord,
};
use npusim_components::{
    ContextState, DeviceMemory, DevicePtr, DeviceState, HostBuffer, NpuError, NpuResult, Stream,
};
use npusim_device::cost::CopyDirection;

use super::Ops;
use crate::runtime::{Inner, Runtime};

/// Gives `ctx` a live shape buffer: allocates it the first time, and again (invalidating every
/// old handle) if a fault released it.
fn ensure_buffer(world: &mut World, ctx: Entity, device: Entity) -> NpuResult<()> {
    let memory = world
        .get::<DeviceState>(device)
        .map(|d| &d.memory)
        .ok_or_else(|| NpuError::Internal("context on a missing device".into()))?;
    let existing = world.get::<ShapeBuffer>(ctx);
    if existing.is_some_and(|b| b.is_alive(memory, ctx)) {
        return Ok(());
    }
    let had = existing.is_some();
    let mut d = world.get_mut::<DeviceState>(device).expect("looked up");
    let base = d.memory.alloc(ShapeBuffer::BYTES, ctx)?;
    // Allocations are not zeroed: clear it so no slot reads as written.
    d.memory
        .fill(base, ShapeBuffer::BYTES, 0, ctx)
        .map_err(|f| NpuError::Internal(format!("clearing a new shape buffer: {f}")))?;
    let epoch = d.memory.epoch(ctx).unwrap_or(0);
    if had {
        world
            .get_mut::<ShapeBuffer>(ctx)
            .expect("present")
            .rebase(base, epoch);
    } else {
        world.entity_mut(ctx).insert(ShapeBuffer::at(base, epoch));
    }
    Ok(())
}

impl Runtime {
    /// Checks that `h` is a live shape handle of context `ctx` of this runtime.
    pub(crate) fn check_shape_handle(
        &self,
        world: &World,
        ctx: Entity,
        h: ShapeHandle,
    ) -> NpuResult<()> {
        let device = world.get::<ContextState>(ctx).map(|c| c.device);
        let memory = device
            .and_then(|d| world.get::<DeviceState>(d))
            .map(|d| &d.memory);
        self.check_shape_handle_in(world, ctx, memory, h)
    }

    /// As [`Runtime::check_shape_handle`], with the context's device memory at hand: one
    /// lookup of the buffer, and its block found by its base.
    pub(crate) fn check_shape_handle_in(
        &self,
        world: &World,
        ctx: Entity,
        memory: Option<&DeviceMemory>,
        h: ShapeHandle,
    ) -> NpuResult<()> {
        if h.runtime() != self.id() {
            return Err(NpuError::ForeignHandle(h.to_string()));
        }
        if h.context() != ctx {
            return Err(NpuError::WrongContext {
                handle: h.to_string(),
                owner: format!("context {}", h.context()),
                current: format!("context {ctx}"),
            });
        }
        let live = world.get::<ShapeBuffer>(ctx).is_some_and(|b| {
            b.is_live(h.slot(), h.generation()) && memory.is_some_and(|m| b.is_alive(m, ctx))
        });
        if !live {
            return Err(NpuError::Destroyed(h.to_string()));
        }
        Ok(())
    }

    /// As [`Runtime::check_shape_handle`], once the context's buffer is known to be alive.
    pub(crate) fn check_shape_handle_fast(
        &self,
        world: &World,
        ctx: Entity,
        h: ShapeHandle,
    ) -> NpuResult<()> {
        if h.runtime() != self.id() || h.context() != ctx {
            return self.check_shape_handle(world, ctx, h);
        }
        match world.get::<ShapeBuffer>(ctx) {
            Some(b) if b.is_live(h.slot(), h.generation()) => Ok(()),
            _ => Err(NpuError::Destroyed(h.to_string())),
        }
    }

    /// The slot address of a checked handle.
    fn slot_addr(world: &World, h: ShapeHandle) -> NpuResult<u64> {
        world
            .get::<ShapeBuffer>(h.context())
            .and_then(|b| b.slot_addr(h.slot()))
            .ok_or_else(|| NpuError::Destroyed(h.to_string()))
    }
}

impl Ops<'_> {
    /// Creates a shape handle in the current context: a slot of its device-side shape buffer,
    /// holding no shape until a producer (or [`Ops::set_shape_async`](crate::Ops::set_shape_async)) writes one.
    ///
    /// A handle is like a buffer: reuse it for another batch only once the previous batch's
    /// consumers are ordered (by stream order or events) before the next producer.
    pub fn create_shape(&self) -> NpuResult<ShapeHandle> {
        let mut g = self.rt.lock();
        let ctx = self.rt.current_ctx(&g)?;
        let device = g.world.get::<ContextState>(ctx).expect("checked").device;
        let cost = g.costs.call_ns;
        g.charge(cost);
        ensure_buffer(&mut g.world, ctx, device)?;
        let (slot, generation) = g
            .world
            .get_mut::<ShapeBuffer>(ctx)
            .expect("ensured")
            .acquire()
            .ok_or_else(|| NpuError::ShapeBufferFull {
                context: format!("context {ctx}"),
                slots: ShapeBuffer::SLOTS,
            })?;
        let h = ShapeHandle::new(self.rt.id(), ctx, slot, generation);
        g.record(|r, _| crate::record::Call::CreateShape { shape: r.shape(h) });
        Ok(h)
    }

    /// Frees a shape handle. Like [`Memory::free`](crate::Memory::free), it first waits for the device's queued
    /// work, so no queued launch can read the slot after it is reused.
    pub fn free_shape(&self, shape: ShapeHandle) -> NpuResult<()> {
        let g = self.rt.lock();
        let ctx = self.rt.current_ctx(&g)?;
        self.rt.check_shape_handle(&g.world, ctx, shape)?;
        let device = g.world.get::<ContextState>(ctx).expect("checked").device;
        let index = g.world.get::<DeviceState>(device).expect("device").index;
        let what = || format!("free of {shape}");
        let done = |i: &Inner| i.device_idle(index);
        let (mut g, result) = self.rt.drive(g, &what, &done, None);
        result?;
        let cost = g.costs.call_ns;
        g.charge(cost);
        // The wait may have faulted the context and lost its buffer: then the handle is gone.
        self.rt.check_shape_handle(&g.world, ctx, shape)?;
        let addr = Runtime::slot_addr(&g.world, shape)?;
        let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
        d.memory
            .fill(addr, SLOT_BYTES, 0, ctx)
            .map_err(|f| NpuError::Internal(format!("clearing {shape}: {f}")))?;
        g.world
            .get_mut::<ShapeBuffer>(ctx)
            .expect("checked")
            .release(shape.slot(), shape.generation());
        g.record(|r, _| crate::record::Call::FreeShape {
            shape: r.shape(shape),
        });
        Ok(())
    }

    /// Enqueues writing `dims` into `shape`'s slot from the host, in stream order (a small
    /// host-to-device copy): how a host-known shape enters a dynamic pipeline. Negative or
    /// overflowing dims are refused here.
    pub fn set_shape_async(
        &self,
        shape: ShapeHandle,
        dims: &[i64],
        stream: Stream,
    ) -> NpuResult<()> {
        let value = ShapeSlot::written(&Shape::from_signed(dims)?);
        let addr = {
            let g = self.rt.lock();
            let (_, ctx) = self.rt.check_stream(&g, stream)?;
            self.rt.check_shape_handle(&g.world, ctx, shape)?;
            Runtime::slot_addr(&g.world, shape)?
        };
        let staged = HostBuffer::staged(bytemuck::bytes_of(&value));
        self.rt
            .memory()
            .memcpy_htod_async(DevicePtr(addr), &staged, SLOT_BYTES, stream)
    }

    /// Reads `shape` back to the host. This is a host round trip: it waits for the device's
    /// queued work (as a synchronous copy does) and is counted in
    /// [`ShapeStats::host_shape_reads`]. Pipelines never need it between a producer and its
    /// consumers.
    pub fn read_shape(&self, shape: ShapeHandle) -> NpuResult<Shape> {
        {
            let g = self.rt.lock();
            let ctx = self.rt.current_ctx(&g)?;
            self.rt.check_shape_handle(&g.world, ctx, shape)?;
        }
        self.rt.synchronize_device()?;
        let mut g = self.rt.lock();
        let ctx = self.rt.current_ctx(&g)?;
        self.rt.check_shape_handle(&g.world, ctx, shape)?;
        let addr = Runtime::slot_addr(&g.world, shape)?;
        let device = g.world.get::<ContextState>(ctx).expect("checked").device;
        let (raw, read_ns) = {
            let costs = g.costs.copy_call_ns;
            let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
            let mut raw = <ShapeSlot as bytemuck::Zeroable>::zeroed();
            d.memory
                .read(addr, bytemuck::bytes_of_mut(&mut raw), ctx)
                .map_err(|f| NpuError::Internal(format!("reading {shape}: {f}")))?;
            let ns = costs
                + d.config
                    .copy_duration_ns(SLOT_BYTES, CopyDirection::DeviceToHost);
            (raw, ns)
        };
        g.charge(read_ns);
        // Counted unless an embedder removed the counters.
        if let Some(mut stats) = g.world.get_resource_mut::<ShapeStats>() {
            stats.host_shape_reads += 1;
        }
        g.record(|_, _| crate::record::Call::ReadShape { ns: read_ns });
        raw.decode()
            .map_err(|why| NpuError::InvalidShape(format!("{shape} {why}")))
    }

    /// Counters of shape propagation and tiling, including the host's shape reads (all zero
    /// if an embedder removed them).
    pub fn shape_stats(&self) -> ShapeStats {
        self.rt
            .lock()
            .world
            .get_resource::<ShapeStats>()
            .cloned()
            .unwrap_or_default()
    }

    /// Turns recording of tiling decisions on or off (off by default; nothing if an embedder
    /// removed the log).
    pub fn set_tiling_log_enabled(&self, on: bool) {
        if let Some(mut log) = self.rt.lock().world.get_resource_mut::<TilingLog>() {
            log.enabled = on;
        }
    }

    /// Takes the tiling decisions recorded so far, in the order they were made.
    pub fn take_tiling_log(&self) -> Vec<TilingRecord> {
        self.rt
            .lock()
            .world
            .get_resource_mut::<TilingLog>()
            .map_or_else(Vec::new, |mut log| std::mem::take(&mut log.records))
    }
}
