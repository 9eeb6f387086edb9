//! Kernel binaries: load an ELF object (or linked image) compiled for the simulated AI core,
//! link it into the current context — `.text` into instruction memory, decoded once; `.rodata`,
//! `.data`, `.bss` into the context's module-data window — and launch its functions through the
//! same path as native kernels. Malformed input is an `ACL_ERROR_PARSE_FILE` error, never a
//! panic.

use std::sync::Arc;

use bevy_ecs::prelude::*;
use npusim_components::binary::{BinaryCode, BinaryState, HostLog, KernelType};
use npusim_components::{
    Binary, ContextState, DeviceState, Kernel, KernelRegistry, NpuError, NpuResult, WorldResources,
};
use npusim_device::core::Program;

use crate::loader::{self, BinaryKind};
use crate::runtime::{Inner, Runtime};

impl Runtime {
    fn check_binary(&self, inner: &Inner, binary: Binary) -> NpuResult<(Entity, Entity)> {
        if binary.runtime() != self.id() {
            return Err(NpuError::ForeignHandle(binary.to_string()));
        }
        let b = inner
            .world
            .get::<BinaryState>(binary.entity())
            .ok_or_else(|| NpuError::Destroyed(binary.to_string()))?;
        let ctx = self.current_ctx(inner)?;
        if b.context != ctx {
            return Err(NpuError::WrongContext {
                handle: binary.to_string(),
                owner: format!("context {}", b.context),
                current: format!("context {ctx}"),
            });
        }
        Ok((binary.entity(), ctx))
    }
}

/// Kernel binaries (ELF objects for the simulated AI core): load, look up functions, unload,
/// and what their launches did.
/// Reached through [`Runtime::binaries`].
#[derive(Clone, Copy)]
pub struct Binaries<'a> {
    pub(crate) rt: &'a Runtime,
}

impl Runtime {
    /// Kernel binaries: load, look up functions, unload.
    pub fn binaries(&self) -> Binaries<'_> {
        Binaries { rt: self }
    }
}

impl Binaries<'_> {
    /// Loads a kernel binary from a file (`aclrtBinaryLoadFromFile`).
    pub fn load_file(&self, path: impl AsRef<std::path::Path>) -> NpuResult<Binary> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| NpuError::File {
            path: path.display().to_string(),
            why: e.to_string(),
        })?;
        self.load(&bytes)
    }

    /// Loads a kernel binary from memory (`aclrtBinaryLoadFromData`) into the current context:
    /// a relocatable RISC-V object (`.o`, relocations applied here) or a linked image.
    pub fn load(&self, bytes: &[u8]) -> NpuResult<Binary> {
        let parsed = loader::parse(bytes).map_err(|e| NpuError::InvalidBinary(e.to_string()))?;
        let mut g = self.rt.lock();
        let ctx = self.rt.current_ctx(&g)?;
        let device = g.world.get::<ContextState>(ctx).expect("checked").device;
        let cost = g.costs.call_ns;
        g.charge(cost);
        let (text_base, data_base) = match (parsed.kind(), parsed.link_address()) {
            (BinaryKind::Executable, Some(bases)) => {
                let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
                d.memory.claim_code(bases.0, parsed.text_size());
                // Without data there is no module data of its own to unmap later.
                (bases.0, if parsed.data_size() > 0 { bases.1 } else { 0 })
            }
            _ => {
                let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
                let text = d.memory.alloc_code(parsed.text_size())?;
                let data = if parsed.data_size() > 0 {
                    match d.memory.map_module_data(ctx, parsed.data_size()) {
                        Ok(base) => base,
                        Err(e) => {
                            d.memory.free_code(text);
                            return Err(e.into());
                        }
                    }
                } else {
                    0
                };
                (text, data)
            }
        };
        let linked = match loader::link(&parsed, text_base, data_base) {
            Ok(l) => l,
            Err(e) => {
                let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
                d.memory.free_code(text_base);
                if data_base != 0 {
                    d.memory.unmap_module_data(ctx, data_base);
                }
                return Err(NpuError::InvalidBinary(e.to_string()));
            }
        };
        let data_len = linked.data.len() as u64;
        if !linked.data.is_empty() {
            let mut d = g.world.get_mut::<DeviceState>(device).expect("device");
            // An executable image brings its own data addresses: map them first.
            if parsed.kind() == BinaryKind::Executable {
                return Err(NpuError::InvalidBinary(
                    "linked images with data are not supported; load the relocatable object".into(),
                ));
            }
            d.memory
                .write_virt(ctx, data_base, &linked.data)
                .map_err(|e| NpuError::Internal(format!("writing module data: {e}")))?;
        }
        let program = Arc::new(Program::decode(linked.text_base, &linked.text));
        g.charge_driver(device);
        let e = g
            .world
            .spawn(BinaryState {
                context: ctx,
                device,
                text_base: linked.text_base,
                text_len: linked.text.len() as u64,
                data_base,
                data_len,
                functions: linked.functions.clone(),
                kernel_types: linked
                    .symbols
                    .iter()
                    .filter_map(|s| KernelType::from_marker(&s.name))
                    .filter(|(_, kind)| *kind != KernelType::Whole)
                    .map(|(name, kind)| (name.to_string(), kind))
                    .collect(),
                program,
            })
            .id();
        g.record(|r, _| crate::record::Call::LoadBinary {
            binary: r.binary(e),
            hash: r.blob(bytes),
        });
        Ok(Binary::new(self.rt.id(), e))
    }

    /// The exported functions of a binary and their entry addresses.
    pub fn functions(&self, binary: Binary) -> NpuResult<Vec<(String, u64)>> {
        let g = self.rt.lock();
        let (b, _) = self.rt.check_binary(&g, binary)?;
        Ok(g.world
            .get::<BinaryState>(b)
            .expect("checked")
            .functions
            .clone())
    }

    /// A launchable kernel for the function `name` of `binary` (`aclrtBinaryGetFunction`).
    /// Launch it with [`Launch`](crate::Launch); its arguments are passed per the LP64F calling
    /// convention, and its duration is the cycles the AI cores count.
    pub fn get_function(&self, binary: Binary, name: &str) -> NpuResult<Kernel> {
        let mut g = self.rt.lock();
        let (b, ctx) = self.rt.check_binary(&g, binary)?;
        let state = g.world.get::<BinaryState>(b).expect("checked");
        let entry = state
            .functions
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, pc)| *pc)
            .ok_or_else(|| NpuError::KernelNotFound(format!("{name} in {binary}")))?;
        let program = state.program.clone();
        let kind = state
            .kernel_types
            .iter()
            .find(|(n, _)| n == name)
            .map_or(KernelType::Whole, |&(_, k)| k);
        // Registered once per function: a second lookup returns the same kernel.
        let kernel = g
            .world
            .res_mut::<KernelRegistry>()?
            .register_function(b, name, || BinaryCode {
                program,
                entry,
                binary: b,
                context: ctx,
                kind,
            });
        g.record(|r, _| crate::record::Call::GetFunction {
            binary: r.binary(b),
            name: name.to_string(),
            function: r.new_function(kernel),
        });
        Ok(kernel)
    }

    /// Unloads a binary (`aclrtBinaryUnLoad`): waits for the device's queued work, then frees
    /// its instruction memory and module data. Its kernels can no longer be launched: their
    /// handles are stale (an error, never another kernel).
    pub fn unload(&self, binary: Binary) -> NpuResult<()> {
        let g = self.rt.lock();
        let (b, ctx) = self.rt.check_binary(&g, binary)?;
        let index = g
            .world
            .get::<ContextState>(ctx)
            .expect("checked")
            .device_index;
        let what = || format!("unload of {binary}");
        let done = |i: &Inner| i.device_idle(index);
        let (mut g, result) = self.rt.drive(g, &what, &done, None);
        result?;
        // A host callback run during the wait may have unloaded it already.
        if !release_binary(&mut g, b) {
            return Err(NpuError::Destroyed(binary.to_string()));
        }
        g.record(|r, _| crate::record::Call::UnloadBinary {
            binary: r.binary(b),
        });
        Ok(())
    }

    /// The binary launches kept so far (the latest 1024, as [`take_binary_launch_stats`] would
    /// take them), without taking them; [`profile_summary`] turns them into a table.
    ///
    /// [`take_binary_launch_stats`]: Binaries::take_launch_stats
    pub fn launch_stats(&self) -> Vec<npusim_components::binary::LaunchStats> {
        self.rt
            .lock()
            .world
            .get_resource::<HostLog>()
            .map_or_else(Vec::new, |log| log.launches.iter().cloned().collect())
    }

    /// Takes the per-block counters (instructions, cycles, core) of the binary launches run
    /// since the last call (the latest 1024; none if an embedder removed the host log).
    pub fn take_launch_stats(&self) -> Vec<npusim_components::binary::LaunchStats> {
        self.rt
            .lock()
            .world
            .get_resource_mut::<HostLog>()
            .map_or_else(Vec::new, |mut log| log.launches.drain(..).collect())
    }

    /// Takes the lines kernels printed (the SDK's `npu_print_*`) since the last call.
    pub fn take_kernel_log(&self) -> Vec<String> {
        self.rt
            .lock()
            .world
            .get_resource_mut::<HostLog>()
            .map_or_else(Vec::new, |mut log| std::mem::take(&mut log.lines))
    }
}

/// Releases a loaded binary: its instruction memory returns to its device, its module data
/// leaves its context's address space, its functions leave the kernel registry (their handles
/// become stale) and the entity goes. Returns false when it was already gone. Unload and
/// context teardown both come here.
pub(crate) fn release_binary(inner: &mut Inner, b: Entity) -> bool {
    let Some(state) = inner.world.get::<BinaryState>(b) else {
        return false;
    };
    let (device, ctx) = (state.device, state.context);
    let (data_base, text_base) = (state.data_base, state.text_base);
    if let Some(mut d) = inner.world.get_mut::<DeviceState>(device) {
        d.memory.free_code(text_base);
        if data_base != 0 {
            d.memory.unmap_module_data(ctx, data_base);
        }
    }
    // Without the registry (an embedder removed it) there are no functions to forget.
    if let Some(mut registry) = inner.world.get_resource_mut::<KernelRegistry>() {
        registry.remove_binary(b);
    }
    inner.world.despawn(b);
    true
}

/// A table of binary kernel launches, one row each, in the spirit of `msprof op`'s summary:
/// simulated time, the busy time of each pipe (MTE2 GM → local, MTE3 local → GM, V vector,
/// M cube, S scalar; summed over blocks, so a pipe busy on every core the whole launch is
/// `cores ×` the launch's time), the distinct HBM bytes moved, and the fractions of the HBM
/// roofline (the time those bytes need at the device's HBM bandwidth over the launch's time)
/// and of the cube roofline (cube-busy cycles over the launch's cycles on all its cores).
/// `NPUSIM_PROFILE=summary` prints it at `aclFinalize`.
pub fn profile_summary(launches: &[npusim_components::binary::LaunchStats]) -> String {
    use std::fmt::Write;
    let us = |cycles: u64, hz: u64| cycles as f64 * 1e6 / hz.max(1) as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:>6} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>6} {:>6}",
        "kernel",
        "blocks",
        "time us",
        "MTE2 us",
        "MTE3 us",
        "V us",
        "M us",
        "S us",
        "HBM bytes",
        "HBM%",
        "cube%"
    );
    for l in launches {
        let hz = l.clock_hz;
        let p = &l.pipe_busy;
        let frac = |num: u64, den: u64| {
            if den == 0 {
                0.0
            } else {
                100.0 * num as f64 / den as f64
            }
        };
        let _ = writeln!(
            out,
            "{:<28} {:>6} {:>11.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>12} {:>6.1} {:>6.1}",
            l.kernel,
            l.blocks.len(),
            us(l.cycles, hz),
            us(p.mte2, hz),
            us(p.mte3, hz),
            us(p.vector, hz),
            us(p.cube, hz),
            us(p.scalar, hz),
            l.hbm_bytes,
            frac(l.hbm_floor_cycles, l.cycles),
            frac(p.cube, l.cycles.saturating_mul(l.cores.max(1) as u64)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use npusim_components::binary::LaunchStats;

    #[test]
    fn the_profile_gives_each_launch_its_time_pipes_bytes_and_rooflines() {
        let mut l = LaunchStats {
            kernel: "add_custom".into(),
            cycles: 2_000,
            hbm_floor_cycles: 1_000,
            hbm_bytes: 65_536,
            cores: 8,
            clock_hz: 1_000_000_000,
            ..LaunchStats::default()
        };
        l.pipe_busy.mte2 = 4_000;
        l.pipe_busy.cube = 8_000;
        let table = profile_summary(&[l]);
        let row = table.lines().nth(1).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[0], "add_custom");
        assert_eq!(cols[2], "2.000"); // 2,000 cycles at 1 GHz
        assert_eq!(cols[3], "4.000"); // MTE2 busy over all blocks
        assert_eq!(cols[8], "65536");
        assert_eq!(cols[9], "50.0"); // the HBM floor is half the launch
        assert_eq!(cols[10], "50.0"); // 8,000 of 8 cores x 2,000 cycles
    }
}
