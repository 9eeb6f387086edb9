//! Device and host memory: allocation, copies and memsets. Every device range a call names is
//! checked against the current context's live allocations before anything is queued, so a bad
//! pointer or a copy past a block's end is an error of the call and changes nothing.

use bevy_ecs::prelude::*;
use npusim_components::task::{CopyDir, CopyView, MemsetView, TaskDescriptor, TaskExtra};
use npusim_components::{
    Context, ContextState, DevicePtr, DeviceState, HostBuffer, NpuError, NpuResult, SimTime, Stream,
};

use crate::runtime::{Inner, Runtime};
use npusim_components::StreamState;
use npusim_device::memory::pool::AllocPolicy;
use npusim_device::memory::spaces::{MemoryError, MemoryStats};

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
            .block_containing(ptr.0, ctx)
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

    /// An allocation, stream-ordered behind `stream`'s submitted work when given.
    #[track_caller]
    fn malloc_on(
        &self,
        size: u64,
        policy: AllocPolicy,
        stream: Option<Entity>,
    ) -> NpuResult<DevicePtr> {
        let mut g = self.lock();
        let ctx = self.current_ctx(&g)?;
        let device = self.device_of(&g.world, ctx);
        let cost = g.costs.call_ns;
        g.charge(cost);
        let first = {
            let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
            d.memory.alloc_with(size, policy, ctx)
        };
        let result = match first {
            Err(MemoryError::OutOfMemory { .. })
                if g.world
                    .get::<DeviceState>(device)
                    .expect("device")
                    .memory
                    .has_pending_frees() =>
            {
                let what = || "pending frees".to_string();
                let done = |i: &Inner| {
                    !i.world
                        .get::<DeviceState>(device)
                        .is_some_and(|d| d.memory.has_pending_frees())
                };
                let (g2, _) = self.drive(g, &what, &done, None);
                g = g2;
                let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
                d.memory.alloc_with(size, policy, ctx)
            }
            other => other,
        };
        g.charge_driver(device);
        if let Ok(ptr) = result {
            crate::record::record!(g, |_, _| crate::record::Call::Malloc {
                size,
                policy: crate::record::policy_code(policy),
                ptr,
            });
            let caller = std::panic::Location::caller();
            crate::sanitizer::allocated(&mut g, ctx, ptr, stream, caller);
        }
        result.map(DevicePtr).map_err(NpuError::from)
    }

    fn validate_free(&self, inner: &Inner, ctx: Entity, ptr: DevicePtr) -> NpuResult<Entity> {
        if ptr.is_null() {
            return Err(NpuError::NullPointer("free"));
        }
        let device = self.device_of(&inner.world, ctx);
        let memory = &inner
            .world
            .get::<DeviceState>(device)
            .expect("device")
            .memory;
        memory.check_free(ptr.0, ctx)?;
        Ok(device)
    }

    #[track_caller]
    fn free_after(
        &self,
        ptr: DevicePtr,
        stream: Option<Stream>,
        behind_uses: bool,
    ) -> NpuResult<()> {
        let mut g = self.lock();
        let ctx = self.current_ctx(&g)?;
        let after: smallvec::SmallVec<[(Entity, u64); 1]> = match stream {
            Some(st) => {
                let (s, _) = self.check_stream(&g, st)?;
                let pos = g.world.get::<StreamState>(s).expect("checked").submitted;
                smallvec::smallvec![(s, pos)]
            }
            None => smallvec::SmallVec::new(),
        };
        let device = self.validate_free(&g, ctx, ptr)?;
        let cost = g.costs.call_ns;
        g.charge(cost);
        let on = after.first().map(|&(s, _)| s);
        let caller = std::panic::Location::caller();
        if !behind_uses {
            crate::sanitizer::freed(&mut g, ctx, ptr.0, on, caller);
        }
        // How far each stream was submitted: only that work keeps the block reserved.
        let enqueued: smallvec::SmallVec<[(Entity, u64); 4]> = g
            .context(ctx)
            .map(|c| {
                c.streams
                    .iter()
                    .filter_map(|&s| g.stream(s).map(|st| (s, st.submitted)))
                    .collect()
            })
            .unwrap_or_default();
        g.world
            .get_mut::<DeviceState>(device)
            .expect("device")
            .memory
            .begin_free_enqueued(ptr.0, ctx, &after, &enqueued)?;
        if behind_uses {
            crate::sanitizer::freed_behind_uses(&mut g, ctx, ptr.0, device, &enqueued, caller);
        }
        // With nothing left on the doorbell, every task that names the block has been seen:
        // if those are all done already, the block goes back to the pool now.
        if !g.doorbell_rung() {
            let world = &g.world;
            let memory = &world.get::<DeviceState>(device).expect("device").memory;
            let all_done = memory
                .pending_positions(ptr.0, ctx)
                .iter()
                .all(|&(s, seq)| {
                    world
                        .get::<StreamState>(s)
                        .is_none_or(|st| st.completed >= seq)
                });
            if all_done {
                let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
                d.memory.release_now(ptr.0, ctx);
            }
        }
        crate::record::record!(g, |r, _| crate::record::Call::Free {
            ptr: ptr.0,
            stream: after.first().map(|&(s, _)| r.stream(s)),
        });
        Ok(())
    }

    fn check_host(buffer: &HostBuffer, offset: u64, bytes: u64) -> NpuResult<()> {
        let len = buffer.bytes()?.len() as u64;
        if offset.checked_add(bytes).is_none_or(|end| end > len) {
            return Err(NpuError::InvalidParam(format!(
                "{bytes} bytes at offset {offset} do not fit a host buffer of {len} bytes"
            )));
        }
        Ok(())
    }

    /// Checks and enqueues a copy between device address `device` and bytes `offset..` of the
    /// host buffer `host`, in direction `dir`.
    #[track_caller]
    fn enqueue_host_copy(
        &self,
        dir: CopyDir,
        device: DevicePtr,
        host: &HostBuffer,
        offset: u64,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        let mut g = self.lock();
        let (s, ctx) = self.check_stream(&g, stream)?;
        let (dst, src, what) = match dir {
            CopyDir::HostToDevice => (device.0, 0, "copy destination"),
            _ => (0, device.0, "copy source"),
        };
        self.check_range(&g, ctx, device, bytes, what)?;
        Self::check_host(host, offset, bytes)?;
        let desc = TaskDescriptor::copy(CopyView {
            dst,
            src,
            bytes,
            dir,
        });
        let extra = TaskExtra::Host {
            buffer: host.clone(),
            offset,
        };
        let cost = g.costs.copy_call_ns;
        let seq = crate::launch::submit(&mut g, s, desc, extra, cost);
        if g.sanitize {
            let writes = dir == CopyDir::DeviceToHost;
            crate::sanitizer::host_copy(&mut g, s, seq, (host, offset, bytes), writes);
        }
        crate::record::record!(g, |r, _| crate::record::host_copy(
            r, dir, device.0, host, offset, bytes, s
        ));
        Ok(())
    }

    /// Waits for the current context's device to finish its queued work, then runs `f` on the
    /// context's default stream and waits for it: the synchronous copies' ordering, as the
    /// legacy default stream gives them. (The sanitizer takes the copy as the calling thread's
    /// own access, ordered after that thread's own earlier work: see
    /// [`SyncCallGuard`](crate::sanitizer::SyncCallGuard).)
    #[track_caller]
    fn sync_op(&self, f: impl FnOnce(Stream) -> NpuResult<()>) -> NpuResult<()> {
        // The copy enqueues from a closure: the caller's site is set for it here.
        let _site = crate::sanitizer::SiteGuard::here();
        let _sync = crate::sanitizer::SyncCallGuard::enter();
        self.synchronize_device()?;
        let stream = self.contexts().default_stream()?;
        f(stream)?;
        self.streams().synchronize(stream)
    }
}

/// Device and pinned host memory: allocation from the context's pool, stream-ordered frees,
/// copies and memsets (`aclrtMalloc`, `aclrtMemcpy*`, `aclrtMemset*`).
/// Reached through [`Runtime::memory`].
#[derive(Clone, Copy)]
pub struct Memory<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Runtime {
    /// Device and pinned host memory: allocation, frees, copies, memsets.
    pub fn memory(&self) -> Memory<'_> {
        Memory { rt: self }
    }
}

impl Memory<'_> {
    /// Allocates `size` bytes of device memory in the current context (64-byte aligned),
    /// huge pages first (`ACL_MEM_MALLOC_HUGE_FIRST`).
    #[track_caller]
    pub fn malloc(&self, size: u64) -> NpuResult<DevicePtr> {
        self.malloc_with_policy(size, AllocPolicy::HugeFirst)
    }

    /// Allocates with an explicit page policy (`aclrtMalloc`'s `aclrtMemMallocPolicy`). From the
    /// context's pool: steady-state allocations make no driver call. When memory is exhausted,
    /// frees still waiting for their streams are completed first and the request retried; only
    /// then is it `ACL_ERROR_RT_DEVICE_OOM`, with nothing changed.
    #[track_caller]
    pub fn malloc_with_policy(&self, size: u64, policy: AllocPolicy) -> NpuResult<DevicePtr> {
        self.rt.malloc_on(size, policy, None)
    }

    /// Frees device memory. Returns at once; the block stays reserved until every stream
    /// position whose task names it has completed, then the deferred-free stage of a frame
    /// returns it to the pool. A queued kernel that reads the block can never see it reused.
    #[track_caller]
    pub fn free(&self, ptr: DevicePtr) -> NpuResult<()> {
        self.rt.free_after(ptr, None, false)
    }

    /// As [`Memory::free`](crate::Memory::free), meant as a free stream-ordered behind every task that names the
    /// block (what the safe API's drop does, as cudarc's drop frees on its stream): the stream
    /// sanitizer then does not report work queued before it. [`Memory::free`](crate::Memory::free) is ACL's
    /// `aclrtFree`, which a real runtime does at once: work not ordered before it is reported.
    #[track_caller]
    pub fn free_behind_uses(&self, ptr: DevicePtr) -> NpuResult<()> {
        self.rt.free_after(ptr, None, true)
    }

    /// Stream-ordered free (`aclrtMemPoolFreeAsync`, `cudaFreeAsync`): as [`Memory::free`](crate::Memory::free),
    /// and also not before `stream` reaches the position of this call.
    #[track_caller]
    pub fn free_async(&self, ptr: DevicePtr, stream: Stream) -> NpuResult<()> {
        self.rt.free_after(ptr, Some(stream), false)
    }

    /// Stream-ordered allocation (`aclrtMemPoolMallocAsync`, `cudaMallocAsync`): the memory may
    /// be used by work enqueued on `stream` after this call.
    #[track_caller]
    pub fn malloc_async(&self, size: u64, stream: Stream) -> NpuResult<DevicePtr> {
        let s = {
            let g = self.rt.lock();
            self.rt.check_stream(&g, stream)?.0
        };
        self.rt.malloc_on(size, AllocPolicy::HugeFirst, Some(s))
    }

    /// Declares that work on `stream` (enqueued so far) uses the block containing `ptr`, so a
    /// later free also waits for that position (as `recordStream`).
    pub fn record_stream(&self, ptr: DevicePtr, stream: Stream) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let (s, ctx) = self.rt.check_stream(&g, stream)?;
        self.rt
            .check_range(&g, ctx, ptr, 0, "record_stream pointer")?;
        let pos = g.world.get::<StreamState>(s).expect("checked").submitted;
        let device = self.rt.device_of(&g.world, ctx);
        let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
        d.memory.note_use(ctx, ptr.0, (s, pos));
        g.record(|r, _| crate::record::Call::RecordStream {
            ptr: ptr.0,
            stream: r.stream(s),
        });
        Ok(())
    }

    /// Reads `out.len()` bytes of context `ctx`'s device memory at `ptr` as they are now,
    /// without waiting for queued work (what a host sees through a mapped view). The C API
    /// reads a launch's argument buffer in device memory this way. An address outside `ctx`'s
    /// mappings is [`NpuError::InvalidPointer`].
    pub fn read_now(&self, ctx: Context, ptr: DevicePtr, out: &mut [u8]) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let c = self.rt.check_context(&g, ctx)?;
        let device = self.rt.device_of(&g.world, c);
        let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
        d.memory
            .read(ptr.0, out, c)
            .map_err(|_| NpuError::InvalidPointer { ptr: ptr.0 })
    }

    /// Memory counters of the current context's device: pool (live, reserved, peaks,
    /// fragmentation), TLB (hits, misses), driver calls, deferred frees.
    pub fn stats(&self) -> NpuResult<MemoryStats> {
        let g = self.rt.lock();
        let ctx = self.rt.current_ctx_entity(&g)?;
        let device = self.rt.device_of(&g.world, ctx);
        Ok(g.world
            .get::<DeviceState>(device)
            .expect("device")
            .memory
            .stats())
    }

    /// Releases memory the current context's pool caches back to the driver (`trim`); returns
    /// the bytes released.
    pub fn trim(&self) -> NpuResult<u64> {
        let mut g = self.rt.lock();
        let ctx = self.rt.current_ctx(&g)?;
        let device = self.rt.device_of(&g.world, ctx);
        let released = g
            .world
            .get_mut::<DeviceState>(device)
            .expect("device")
            .memory
            .trim(ctx);
        g.charge_driver(device);
        crate::sanitizer::trimmed(&mut g, ctx, device);
        g.record(|_, _| crate::record::Call::TrimMemory);
        Ok(released)
    }

    /// Allocates `size` bytes of pinned (page-locked) host memory. Past the pinned budget
    /// ([`PINNED_HOST_LIMIT`](npusim_components::host::PINNED_HOST_LIMIT)) or the host's memory
    /// it is `ACL_ERROR_RT_MEMORY_ALLOCATION`, with nothing allocated.
    pub fn malloc_host(&self, size: u64) -> NpuResult<HostBuffer> {
        if size == 0 {
            return Err(NpuError::InvalidParam(format!(
                "host allocation of {size} bytes"
            )));
        }
        let buffer = HostBuffer::try_new(size, true)?;
        let mut g = self.rt.lock();
        let cost = g.costs.call_ns;
        g.charge(cost);
        g.record(|r, _| crate::record::Call::MallocHost {
            size,
            host: r.new_host(&buffer),
        });
        Ok(buffer)
    }

    /// Frees host memory from [`Memory::malloc_host`](crate::Memory::malloc_host); later uses of the buffer are errors.
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
        let (mut g, result) = self.rt.drive(self.rt.lock(), &what, &done, None);
        if result.is_ok() {
            crate::sanitizer::host_freed(&mut g, buffer);
            g.record_new(|r, _| {
                let host = r.forget_host(buffer)?;
                Some(crate::record::Call::FreeHost { host })
            });
        }
        drop(g);
        result?;
        if !buffer.mark_freed() {
            return Err(NpuError::InvalidMemoryType(
                "host buffer freed twice".into(),
            ));
        }
        Ok(())
    }

    /// Enqueues a copy of `bytes` bytes from host buffer `src` to device address `dst`.
    #[track_caller]
    pub fn memcpy_htod_async(
        &self,
        dst: DevicePtr,
        src: &HostBuffer,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        self.memcpy_htod_async_at(dst, src, 0, bytes, stream)
    }

    /// As [`Memory::memcpy_htod_async`](crate::Memory::memcpy_htod_async), from byte `offset` of `src` on: the bytes are read
    /// when the copy runs, as a DMA engine reads pinned memory.
    #[track_caller]
    pub fn memcpy_htod_async_at(
        &self,
        dst: DevicePtr,
        src: &HostBuffer,
        offset: u64,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        self.rt
            .enqueue_host_copy(CopyDir::HostToDevice, dst, src, offset, bytes, stream)
    }

    /// Enqueues a copy from pageable host memory. As CUDA documents for pageable memory, the
    /// bytes are staged at the call (the host pays for it), so `src` may be reused at once.
    #[track_caller]
    pub fn memcpy_htod_async_pageable<T: bytemuck::Pod>(
        &self,
        dst: DevicePtr,
        src: &[T],
        stream: Stream,
    ) -> NpuResult<()> {
        let bytes: &[u8] = bytemuck::cast_slice(src);
        let staged = HostBuffer::staged(bytes);
        let stage_cost =
            (bytes.len() as u64).div_ceil(1024) * self.rt.lock().costs.stage_ns_per_kib;
        self.memcpy_htod_async(dst, &staged, bytes.len() as u64, stream)?;
        self.rt.host_work(SimTime(stage_cost));
        Ok(())
    }

    /// Enqueues a copy of `bytes` bytes from device address `src` to host buffer `dst`.
    #[track_caller]
    pub fn memcpy_dtoh_async(
        &self,
        dst: &HostBuffer,
        src: DevicePtr,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        self.memcpy_dtoh_async_at(dst, 0, src, bytes, stream)
    }

    /// As [`Memory::memcpy_dtoh_async`](crate::Memory::memcpy_dtoh_async), into `dst` from byte `offset` on.
    #[track_caller]
    pub fn memcpy_dtoh_async_at(
        &self,
        dst: &HostBuffer,
        offset: u64,
        src: DevicePtr,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        self.rt
            .enqueue_host_copy(CopyDir::DeviceToHost, src, dst, offset, bytes, stream)
    }

    /// Enqueues a copy of `bytes` bytes between two device addresses of the current context.
    #[track_caller]
    pub fn memcpy_dtod_async(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let (s, ctx) = self.rt.check_stream(&g, stream)?;
        self.rt
            .check_range(&g, ctx, dst, bytes, "copy destination")?;
        self.rt.check_range(&g, ctx, src, bytes, "copy source")?;
        let desc = TaskDescriptor::copy(CopyView {
            dst: dst.0,
            src: src.0,
            bytes,
            dir: CopyDir::DeviceToDevice,
        });
        let cost = g.costs.copy_call_ns;
        crate::launch::submit(&mut g, s, desc, TaskExtra::None, cost);
        crate::record::record!(g, |r, _| crate::record::Call::CopyDevice {
            dst: dst.0,
            src: src.0,
            bytes,
            stream: r.stream(s),
        });
        Ok(())
    }

    /// Enqueues setting `bytes` bytes at `dst` to `value`.
    #[track_caller]
    pub fn memset_async(
        &self,
        dst: DevicePtr,
        value: u8,
        bytes: u64,
        stream: Stream,
    ) -> NpuResult<()> {
        let mut g = self.rt.lock();
        let (s, ctx) = self.rt.check_stream(&g, stream)?;
        self.rt
            .check_range(&g, ctx, dst, bytes, "memset destination")?;
        let desc = TaskDescriptor::memset(MemsetView {
            dst: dst.0,
            value,
            bytes,
        });
        let cost = g.costs.copy_call_ns;
        crate::launch::submit(&mut g, s, desc, TaskExtra::None, cost);
        crate::record::record!(g, |r, _| crate::record::Call::Memset {
            dst: dst.0,
            value,
            bytes,
            stream: r.stream(s),
        });
        Ok(())
    }

    /// Copies `src` to device address `dst`, synchronously.
    #[track_caller]
    pub fn memcpy_htod<T: bytemuck::Pod>(&self, dst: DevicePtr, src: &[T]) -> NpuResult<()> {
        let bytes: &[u8] = bytemuck::cast_slice(src);
        let staged = HostBuffer::staged(bytes);
        self.rt
            .sync_op(|s| self.memcpy_htod_async(dst, &staged, bytes.len() as u64, s))
    }

    /// Copies from device address `src` into `dst`, synchronously.
    #[track_caller]
    pub fn memcpy_dtoh<T: bytemuck::Pod>(&self, dst: &mut [T], src: DevicePtr) -> NpuResult<()> {
        let out: &mut [u8] = bytemuck::cast_slice_mut(dst);
        let staged = HostBuffer::new(out.len(), false);
        self.rt
            .sync_op(|s| self.memcpy_dtoh_async(&staged, src, out.len() as u64, s))?;
        out.copy_from_slice(&staged.bytes()?);
        Ok(())
    }

    /// Copies `bytes` bytes between device addresses, synchronously.
    #[track_caller]
    pub fn memcpy_dtod(&self, dst: DevicePtr, src: DevicePtr, bytes: u64) -> NpuResult<()> {
        self.rt
            .sync_op(|s| self.memcpy_dtod_async(dst, src, bytes, s))
    }

    /// Sets `bytes` bytes at `dst` to `value`, synchronously.
    #[track_caller]
    pub fn memset(&self, dst: DevicePtr, value: u8, bytes: u64) -> NpuResult<()> {
        self.rt.sync_op(|s| self.memset_async(dst, value, bytes, s))
    }
}
