//! Tiling (DESIGN §3, stage 4): each op launch whose shapes were resolved this frame runs its
//! op's tiling function on the actual shapes and the device's resources (AI cores, unified
//! buffer, L1). The result — block dim, tiling key, tiling words — goes into the task
//! descriptor, where dispatch (block dim) and the kernel (tiling words) read it; the op's cost
//! function prices the launch from the same shapes and tiling, into its [`OpLaunch`]. A tiling that does
//! not fit the device (too many blocks, tiles past a core's buffers) rejects the launch
//! instead of running it.

use bevy_ecs::prelude::*;
use npusim_components::shape::{
    OpDef, OpLaunch, OpRegistry, OpState, ResolvedLaunch, ResolvedShapes, ShapeStats, Tiling,
    TilingLog, TilingRecord, tiling_word,
};
use npusim_components::task::MAX_TILING;
use npusim_components::{DeviceState, NpuError, Task, TaskDescriptor};
use npusim_device::config::DeviceConfig;

/// Computes and writes the tiling of every launch resolved this frame.
pub fn compute_tiling(
    mut resolved: ResMut<ResolvedShapes>,
    mut tasks: Query<&mut Task>,
    devices: Query<&DeviceState>,
    ops: Res<OpRegistry>,
    mut log: ResMut<TilingLog>,
    mut stats: ResMut<ShapeStats>,
) {
    crate::zone!("npusim::tiling");
    for launch in &resolved.launches {
        let Ok(mut task) = tasks.get_mut(launch.task) else {
            continue;
        };
        let Some(op) = ops.by_slot(task.desc.kernel) else {
            continue;
        };
        let Ok(device) = devices.get(task.device) else {
            continue;
        };
        let task = &mut *task;
        let Some(op_launch) = task.extra.op_mut() else {
            continue;
        };
        match tile_launch(&mut task.desc, op_launch, launch, op, &device.config) {
            Ok(tiling) => {
                stats.tilings += 1;
                if log.enabled {
                    let shapes = launch.op_shapes(&[]);
                    log.records.push(TilingRecord {
                        op: op.name.clone(),
                        stream: task.stream,
                        seq: task.seq,
                        inputs: shapes.inputs.to_vec(),
                        outputs: shapes.outputs.to_vec(),
                        tiling,
                    });
                }
            }
            Err(err) => {
                stats.shape_faults += 1;
                crate::shapes::reject(task, err);
            }
        }
    }
    resolved.launches.clear();
}

/// Runs `op`'s tiling for a resolved launch, checks it against the device and writes it, with
/// the launch's cost, into `desc`. Public so benches and embedders can run the stage's core.
pub fn tile_launch(
    desc: &mut TaskDescriptor,
    op_launch: &mut OpLaunch,
    launch: &ResolvedLaunch,
    op: &OpDef,
    config: &DeviceConfig,
) -> Result<Tiling, NpuError> {
    let attrs = op_launch.attrs(desc);
    let shapes = launch.op_shapes(attrs);
    let tiling = (op.tiling)(&shapes, config)
        .map_err(|m| NpuError::InvalidShape(format!("{}: {m}", op.name)))?;
    tiling
        .check(config)
        .map_err(|detail| NpuError::AicoreException {
            kernel: op.name.clone(),
            detail: format!("tiling rejected: {detail}"),
        })?;
    let cost = (op.cost)(&shapes, &tiling);
    let out_capacity = if launch.n_out > 0 {
        launch.capacities[launch.n_in as usize]
    } else {
        0
    };
    let mut words = [0u32; MAX_TILING];
    words[tiling_word::KEY] = tiling.key;
    words[tiling_word::OUT_SLOT] = launch.out_slot as u32;
    words[tiling_word::OUT_SLOT + 1] = (launch.out_slot >> 32) as u32;
    words[tiling_word::OUT_CAPACITY] = out_capacity as u32;
    words[tiling_word::OUT_CAPACITY + 1] = (out_capacity >> 32) as u32;
    let op_words = tiling.words();
    words[tiling_word::OP..tiling_word::OP + op_words.len()].copy_from_slice(op_words);
    desc.set_tiling(&words[..tiling_word::OP + op_words.len()]);
    desc.tiling_key = tiling.key;
    desc.block_dim = tiling.block_dim;
    op_launch.workspace_bytes = tiling.workspace_bytes;
    op_launch.cost = cost;
    op_launch.state = OpState::Tiled;
    Ok(tiling)
}
