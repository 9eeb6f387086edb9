//! Device and host memory: allocation, copies and memsets. Every device range a call names is
//! checked against the current context's live allocations before anything is queued, so a bad
//! pointer or a copy past a block's end is an error of the call and changes nothing.

use bevy_ecs::prelude::*;
use npusim_components::task::{TaskDescriptor, TaskExtra, copy_dir};
use npusim_components::{
    ContextState, DevicePtr, DeviceState, HostBuffer, NpuError, NpuResult, SimTime, Stream,
    TaskKind,
};

use crate::runtime::{Inner, Runtime};

/// Largest single host allocation (`malloc_host`), 64 GiB: beyond it is surely a mistake.
const MAX_HOST_ALLOC: u64 = 64 << 30;

impl Runtime {
    fn device_of(&self, world: &World, ctx: Entity) -> Entity {
        world.get::<ContextState>(ctx).expect("checked").device
    }

    /// Checks that `[ptr, ptr+len)` lies inside one live allocation of context `ctx`.
    pub(crate) fn check_range(
        &self,
        inner: &Inner,
        ctx: Entity,
        ptr: DevicePtr,
        len: u64,
        what: &'static str,
    ) -> NpuResult<()> {
        let world = &inner.world;
        if ptr.is_null() {
            return Err(NpuError::NullPointer(what));
        }
        let device = self.device_of(world, ctx);
        let memory = &world.get::<DeviceState>(device).expect("device").memory;
        let block = memory
            .block_containing(ptr.0)
            .filter(|b| b.context == ctx)
            .ok_or(NpuError::InvalidPointer { ptr: ptr.0 })?;
        if ptr
            .0
            .checked_add(len)
            .is_none_or(|end| end > block.base + block.size)
        {
            return Err(NpuError::OutOfBounds {
                ptr: ptr.0,
                len,
                base: block.base,
                size: block.size,
            });
        }
        Ok(())
    }

    /// Allocates `size` bytes of device memory in the current context (64-byte aligned).
    pub fn malloc(&self, size: u64) -> NpuResult<DevicePtr> {
        let mut g = self.lock();
        let ctx = self.current_ctx(&g)?;
        let device = self.device_of(&g.world, ctx);
        let cost = g.costs.call_ns;
        g.charge(cost);
        let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
        d.memory.alloc(size, ctx).map(DevicePtr)
    }

    /// Frees device memory from [`Runtime::malloc`]. Like `cudaFree`, it first waits for the
    /// device's queued work, so no queued task can touch the memory after it is reused.
    pub fn free(&self, ptr: DevicePtr) -> NpuResult<()> {
        let g = self.lock();
        let ctx = self.current_ctx(&g)?;
        if ptr.is_null() {
            return Err(NpuError::NullPointer("free"));
        }
        let device = self.device_of(&g.world, ctx);
        // Refuse a bad pointer before waiting for anything.
        let memory = &g.world.get::<DeviceState>(device).expect("device").memory;
        match memory.block_containing(ptr.0) {
            Some(b) if b.base == ptr.0 && b.context == ctx => {}
            Some(b) if b.base == ptr.0 => {
                return Err(NpuError::BadFree {
                    ptr: ptr.0,
                    why: "the allocation belongs to another context",
                });
            }
            Some(_) => {
                return Err(NpuError::BadFree {
                    ptr: ptr.0,
                    why: "not the start of an allocation",
                });
            }
            None => {
                return Err(NpuError::BadFree {
                    ptr: ptr.0,
                    why: "not a live allocation (double free or unknown pointer)",
                });
            }
        }
        let device_index = g.world.get::<DeviceState>(device).expect("device").index;
        let what = || format!("free of {ptr}");
        let done = |i: &Inner| i.device_idle(device_index);
        let (mut g, result) = self.drive(g, &what, &done, None);
        result?;
        let cost = g.costs.call_ns;
        g.charge(cost);
        let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
        d.memory.free(ptr.0, ctx).map(|_| ())
    }

    /// Allocates `size` bytes of pinned (page-locked) host memory.
    pub fn malloc_host(&self, size: u64) -> NpuResult<HostBuffer> {
        if size == 0 || size > MAX_HOST_ALLOC {
            return Err(NpuError::InvalidParam(format!(
                "host allocation of {size} bytes"
            )));
        }
        let mut g = self.lock();
        let cost = g.costs.call_ns;
        g.charge(cost);
        Ok(HostBuffer::new(size as usize, true))
    }

    /// Frees host memory from [`Runtime::malloc_host`]; later uses of the buffer are errors.
    /// Like `cudaFreeHost`, it first waits for the devices' queued work, so a queued copy from
    /// or to the buffer completes instead of failing (and faulting its context).
    pub fn free_host(&self, buffer: &HostBuffer) -> NpuResult<()> {
        if !buffer.is_pinned() {
            return Err(NpuError::InvalidMemoryType(
                "not memory from malloc_host".into(),
            ));
        }
        if buffer.is_freed() {
            return Err(NpuError::InvalidMemoryType(
                "host buffer freed twice".into(),
            ));
        }
        let what = || "free_host".to_string();
        let done = |i: &Inner| (0..i.devices.len() as u32).all(|d| i.device_idle(d));
        let (g, result) = self.drive(self.lock(), &what, &done, None);
        drop(g);
        result?;
        if !buffer.mark_freed() {
            return Err(NpuError::InvalidMemoryType(
                "host buffer freed twice".into(),
            ));
        }
        Ok(())
    }

    fn check_host(buffer: &HostBuffer, bytes: u64) -> NpuResult<()> {
        let len = buffer.bytes()?.len() as u64;
        if bytes > len {
            return Err(NpuError::InvalidParam(format!(
                "{bytes} bytes do not fit a host buffer of {len} bytes"
            )));
        }
        Ok(())
    }

    /// Enqueues a copy of `bytes` bytes from host buffer `src` to device address `dst`.
    pub fn memcpy_htod_async(
        &self,
        dst: DevicePtr,
        src: &HostBuffer,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        let mut g = self.lock();
        let (s, ctx) = self.check_stream(&g, stream)?;
        self.check_range(&g, ctx, dst, bytes, "copy destination")?;
        Self::check_host(src, bytes)?;
        let mut desc = TaskDescriptor::new(TaskKind::Memcpy);
        desc.flags = copy_dir::H2D;
        desc.args[..3].copy_from_slice(&[dst.0, 0, bytes]);
        let cost = g.costs.copy_call_ns;
        crate::launch::submit(
            &mut g,
            s,
            desc,
            TaskExtra::Host {
                buffer: src.clone(),
                offset: 0,
            },
            cost,
        );
        Ok(())
    }

    /// Enqueues a copy from pageable host memory. As CUDA documents for pageable memory, the
    /// bytes are staged at the call (the host pays for it), so `src` may be reused at once.
    pub fn memcpy_htod_async_pageable<T: bytemuck::Pod>(
        &self,
        dst: DevicePtr,
        src: &[T],
        stream: Stream,
    ) -> NpuResult<()> {
        let bytes: &[u8] = bytemuck::cast_slice(src);
        let staged = HostBuffer::staged(bytes);
        let stage_cost = (bytes.len() as u64).div_ceil(1024) * self.lock().costs.stage_ns_per_kib;
        self.memcpy_htod_async(dst, &staged, bytes.len() as u64, stream)?;
        self.host_work(SimTime(stage_cost));
        Ok(())
    }

    /// Enqueues a copy of `bytes` bytes from device address `src` to host buffer `dst`.
    pub fn memcpy_dtoh_async(
        &self,
        dst: &HostBuffer,
        src: DevicePtr,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        let mut g = self.lock();
        let (s, ctx) = self.check_stream(&g, stream)?;
        self.check_range(&g, ctx, src, bytes, "copy source")?;
        Self::check_host(dst, bytes)?;
        let mut desc = TaskDescriptor::new(TaskKind::Memcpy);
        desc.flags = copy_dir::D2H;
        desc.args[..3].copy_from_slice(&[0, src.0, bytes]);
        let cost = g.costs.copy_call_ns;
        crate::launch::submit(
            &mut g,
            s,
            desc,
            TaskExtra::Host {
                buffer: dst.clone(),
                offset: 0,
            },
            cost,
        );
        Ok(())
    }

    /// Enqueues a copy of `bytes` bytes between two device addresses of the current context.
    pub fn memcpy_dtod_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        let mut g = self.lock();
        let (s, ctx) = self.check_stream(&g, stream)?;
        self.check_range(&g, ctx, dst, bytes, "copy destination")?;
        self.check_range(&g, ctx, src, bytes, "copy source")?;
        let mut desc = TaskDescriptor::new(TaskKind::Memcpy);
        desc.flags = copy_dir::D2D;
        desc.args[..3].copy_from_slice(&[dst.0, src.0, bytes]);
        let cost = g.costs.copy_call_ns;
        crate::launch::submit(&mut g, s, desc, TaskExtra::None, cost);
        Ok(())
    }

    /// Enqueues setting `bytes` bytes at `dst` to `value`.
    pub fn memset_async(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        let mut g = self.lock();
        let (s, ctx) = self.check_stream(&g, stream)?;
        self.check_range(&g, ctx, dst, bytes, "memset destination")?;
        let mut desc = TaskDescriptor::new(TaskKind::Memset);
        desc.args[..3].copy_from_slice(&[dst.0, value as u64, bytes]);
        let cost = g.costs.copy_call_ns;
        crate::launch::submit(&mut g, s, desc, TaskExtra::None, cost);
        Ok(())
    }

    /// Waits for the current context's device to finish its queued work, then runs `f` on the
    /// context's default stream and waits for it: the synchronous copies' ordering, as the
    /// legacy default stream gives them.
    fn sync_op(&self, f: impl FnOnce(Stream) -> NpuResult<()>) -> NpuResult<()> {
        self.synchronize_device()?;
        let stream = self.default_stream()?;
        f(stream)?;
        self.synchronize_stream(stream)
    }

    /// Copies `src` to device address `dst`, synchronously.
    pub fn memcpy_htod<T: bytemuck::Pod>(&self, dst: DevicePtr, src: &[T]) -> NpuResult<()> {
        let bytes: &[u8] = bytemuck::cast_slice(src);
        let staged = HostBuffer::staged(bytes);
        self.sync_op(|s| self.memcpy_htod_async(dst, &staged, bytes.len() as u64, s))
    }

    /// Copies from device address `src` into `dst`, synchronously.
    pub fn memcpy_dtoh<T: bytemuck::Pod>(&self, dst: &mut [T], src: DevicePtr) -> NpuResult<()> {
        let out: &mut [u8] = bytemuck::cast_slice_mut(dst);
        let staged = HostBuffer::new(out.len(), false);
        self.sync_op(|s| self.memcpy_dtoh_async(&staged, src, out.len() as u64, s))?;
        out.copy_from_slice(&staged.bytes()?);
        Ok(())
    }

    /// Copies `bytes` bytes between device addresses, synchronously.
    pub fn memcpy_dtod(&self, dst: DevicePtr, src: DevicePtr, bytes: u64) -> NpuResult<()> {
        self.sync_op(|s| self.memcpy_dtod_async(dst, src, bytes, s))
    }

    /// Sets `bytes` bytes at `dst` to `value`, synchronously.
    pub fn memset(&self, dst: DevicePtr, value: u8, bytes: u64) -> NpuResult<()> {
        self.sync_op(|s| self.memset_async(dst, value, bytes, s))
    }
}
