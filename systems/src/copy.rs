//! The frame's part of copies and memsets: how long they take (dispatch) and moving their bytes
//! (the hardware tick). Their words are [`CopyView`] / [`MemsetView`] / [`PeerCopy`]; the API
//! side that checks and enqueues them is the engine's `memory.rs` and `collective.rs`.
//!
//! Bytes move in bounded chunks, so a copy of many gigabytes (legal on a large preset) never
//! needs a host buffer of its size.

use bevy_ecs::prelude::*;
use npusim_components::collective::PeerCopy;
use npusim_components::memory::AccessFault;
use npusim_components::resources::Devices;
use npusim_components::task::{CopyDir, CopyView, MemsetView};
use npusim_components::{DeviceMemory, DeviceState, NpuError, TaskExtra};
use npusim_device::config::DeviceConfig;
use npusim_device::cost::CopyDirection;

/// Most bytes staged at once when device memory is copied to device memory.
pub const CHUNK: usize = 1 << 20;

/// How long a copy within one device (or to or from the host) takes on one DMA engine.
pub fn copy_duration_ns(config: &DeviceConfig, copy: &CopyView) -> u64 {
    let dir = match copy.dir {
        CopyDir::HostToDevice => CopyDirection::HostToDevice,
        CopyDir::DeviceToHost => CopyDirection::DeviceToHost,
        CopyDir::DeviceToDevice | CopyDir::Peer => CopyDirection::DeviceToDevice,
    };
    config.copy_duration_ns(copy.bytes, dir)
}

/// How long a memset takes on one DMA engine.
pub fn memset_duration_ns(config: &DeviceConfig, memset: &MemsetView) -> u64 {
    config.memset_duration_ns(memset.bytes)
}

fn fault(kernel: &str) -> impl Fn(AccessFault) -> NpuError + '_ {
    move |f| NpuError::AicoreException {
        kernel: kernel.into(),
        detail: f.to_string(),
    }
}

/// Moves the bytes of a copy within one device (or to or from a host buffer).
pub fn execute_copy(
    copy: &CopyView,
    extra: &TaskExtra,
    memory: &mut DeviceMemory,
    context: Entity,
) -> Result<(), NpuError> {
    // Zero bytes touch nothing (and name no block in the access set, so the block may already
    // be gone): nothing to check, nothing to move.
    if copy.bytes == 0 {
        return Ok(());
    }
    let fault = fault("memcpy");
    let len =
        usize::try_from(copy.bytes).map_err(|_| NpuError::InvalidParam("copy too large".into()))?;
    let host_range = |offset: u64, len: usize| {
        let start = usize::try_from(offset).ok()?;
        Some(start..start.checked_add(len)?)
    };
    let past = || NpuError::InvalidParam("host range past the buffer".into());
    match (copy.dir, extra) {
        (CopyDir::HostToDevice, TaskExtra::Host { buffer, offset }) => {
            let data = buffer.bytes()?;
            let chunk = host_range(*offset, len)
                .and_then(|r| data.get(r))
                .ok_or_else(past)?;
            memory.write(copy.dst, chunk, context).map_err(fault)
        }
        (CopyDir::DeviceToHost, TaskExtra::Host { buffer, offset }) => {
            let mut data = buffer.bytes()?;
            let chunk = host_range(*offset, len)
                .and_then(|r| data.get_mut(r))
                .ok_or_else(past)?;
            memory.read(copy.src, chunk, context).map_err(fault)
        }
        (CopyDir::DeviceToDevice, _) => {
            memory
                .check(copy.src, copy.bytes, context)
                .map_err(&fault)?;
            memory
                .check(copy.dst, copy.bytes, context)
                .map_err(&fault)?;
            // Overlapping ranges copy as `memmove` does: chunk by chunk in the direction that
            // never reads what was just written.
            let forward = copy.dst <= copy.src || copy.dst >= copy.src + copy.bytes;
            move_within(memory, copy, context, forward).map_err(fault)
        }
        _ => Err(NpuError::Internal("malformed copy descriptor".into())),
    }
}

/// Copies `copy.bytes` from `copy.src` to `copy.dst` in one address space, chunk by chunk,
/// front to back (`forward`) or back to front, so overlapping ranges end up as `memmove` leaves
/// them.
fn move_within(
    memory: &mut DeviceMemory,
    copy: &CopyView,
    context: Entity,
    forward: bool,
) -> Result<(), AccessFault> {
    let mut buf = vec![0u8; (copy.bytes as usize).min(CHUNK)];
    let mut left = copy.bytes;
    while left > 0 {
        let n = (left as usize).min(CHUNK);
        let at = if forward {
            copy.bytes - left
        } else {
            left - n as u64
        };
        memory.read(copy.src + at, &mut buf[..n], context)?;
        memory.write(copy.dst + at, &buf[..n], context)?;
        left -= n as u64;
    }
    Ok(())
}

/// Fills a memset's bytes.
pub fn execute_memset(
    memset: &MemsetView,
    memory: &mut DeviceMemory,
    context: Entity,
) -> Result<(), NpuError> {
    if memset.bytes == 0 {
        return Ok(());
    }
    memory
        .fill(memset.dst, memset.bytes, memset.value, context)
        .map_err(fault("memset"))
}

/// Copies a peer copy's bytes from the source device's memory to the destination's.
pub fn execute_peer_copy(
    devices: &mut Query<&mut DeviceState>,
    device_entities: &Devices,
    copy: &PeerCopy,
) -> Result<(), NpuError> {
    if copy.bytes == 0 {
        return Ok(());
    }
    let fault = fault("memcpy_peer");
    let entity = |index: u32| {
        device_entities
            .entities
            .get(index as usize)
            .copied()
            .ok_or_else(|| NpuError::Internal("peer copy between missing devices".into()))
    };
    let (src_e, dst_e) = (entity(copy.src_device)?, entity(copy.dst_device)?);
    let missing = || NpuError::Internal("peer copy between missing devices".into());
    devices
        .get(src_e)
        .map_err(|_| missing())?
        .memory
        .check(copy.src, copy.bytes, copy.src_ctx)
        .map_err(&fault)?;
    devices
        .get(dst_e)
        .map_err(|_| missing())?
        .memory
        .check(copy.dst, copy.bytes, copy.dst_ctx)
        .map_err(&fault)?;
    let mut buf = vec![0u8; (copy.bytes as usize).min(CHUNK)];
    let mut done = 0u64;
    while done < copy.bytes {
        let n = ((copy.bytes - done) as usize).min(CHUNK);
        let chunk = &mut buf[..n];
        devices
            .get_mut(src_e)
            .map_err(|_| missing())?
            .memory
            .read(copy.src + done, chunk, copy.src_ctx)
            .map_err(&fault)?;
        devices
            .get_mut(dst_e)
            .map_err(|_| missing())?
            .memory
            .write(copy.dst + done, chunk, copy.dst_ctx)
            .map_err(&fault)?;
        done += n as u64;
    }
    Ok(())
}
