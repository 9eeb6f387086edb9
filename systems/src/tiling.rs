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
    If(mut resolved): If<ResMut<ResolvedShapes>>,
    mut tasks: Query<&mut Task>,
    devices: Query<&DeviceState>,
    If(ops): If<Res<OpRegistry>>,
    // A log and counters only: without them (an embedder removed them) the stage runs
    // unrecorded.
    mut log: Option<ResMut<TilingLog>>,
    mut stats: Option<ResMut<ShapeStats>>,
) {
    crate::zone!("npusim::tiling");
    let mut uncounted = ShapeStats::default();
    let stats = stats.as_deref_mut().unwrap_or(&mut uncounted);
    for launch in &resolved.launches {
        let Ok(mut task) = tasks.get_mut(launch.task) else {
            continue;
        };
        let Some(op) = ops.resolve(task.desc.kernel_slot()) else {
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
                if let Some(log) = log.as_mut().filter(|l| l.enabled) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::*;
    use npusim_components::shape::{OpTiling, Shape};
    use npusim_components::{Kernel, TaskExtra, TaskStatus};
    use npusim_device::cost::KernelCost;

    /// An `add` launch on `n` elements whose shapes shape propagation has resolved; `attr` is
    /// its block-dim attribute (0: let the tiling choose).
    fn resolved_add(s: &mut Setup, k: Kernel, n: u64, attr: u64) -> Entity {
        let [x, y, z] = [0; 3].map(|_| alloc(&mut s.world, s.device, s.ctx, 4096));
        let mut op = npusim_components::shape::OpLaunch::new(2, 1);
        op.state = OpState::Resolved;
        let t = enqueue_with(
            &mut s.world,
            s.stream,
            launch(k, 1, &[x, y, z, attr]),
            TaskExtra::Op(Box::new(op)),
            npusim_components::SimTime::ZERO,
        );
        make_ready(&mut s.world, t);
        let shape = Shape::new(&[n]).unwrap();
        let mut launch = ResolvedLaunch::EMPTY;
        launch.task = t;
        launch.n_in = 2;
        launch.n_out = 1;
        launch.shapes[..3].copy_from_slice(&[shape; 3]);
        launch.capacities[..3].copy_from_slice(&[4096; 3]);
        s.world
            .resource_mut::<ResolvedShapes>()
            .launches
            .push(launch);
        t
    }

    #[test]
    fn a_resolved_launch_gets_its_block_dim_tiling_words_and_cost() {
        let mut s = setup();
        s.world.resource_mut::<TilingLog>().enabled = true;
        let k = register_add_op(&mut s.world);
        let t = resolved_add(&mut s, k, 20, 0);
        run(&mut s.world, compute_tiling);

        let task = task(&s.world, t);
        assert_eq!(task.desc.block_dim, 3, "20 elements, 8 per block");
        assert_eq!(task.desc.tiling_key, 7);
        let words = OpTiling::parse(task.desc.tiling_words()).expect("a tiling header");
        assert_eq!(words.key(), 7);
        assert_eq!(words.u64_at(0), 20, "the op's own words follow the header");
        assert_eq!(words.out_capacity(), 4096);
        let op = task.extra.op().unwrap();
        assert_eq!(op.state, OpState::Tiled);
        assert_eq!(op.cost, KernelCost::vector(20.0, 240.0));
        assert!(s.world.resource::<ResolvedShapes>().launches.is_empty());
        assert_eq!(s.world.resource::<ShapeStats>().tilings, 1);
        let log = &s.world.resource::<TilingLog>().records;
        assert_eq!(log.len(), 1);
        assert_eq!((log[0].op.as_str(), log[0].seq), ("add", 1));
        assert_eq!(log[0].tiling.block_dim, 3);
    }

    #[test]
    fn a_tiling_past_the_devices_cores_rejects_the_launch() {
        let mut s = setup();
        let k = register_add_op(&mut s.world);
        // The small preset has 4 AI cores.
        let t = resolved_add(&mut s, k, 20, 64);
        run(&mut s.world, compute_tiling);

        let task = task(&s.world, t);
        assert!(matches!(
            task.error.as_deref(),
            Some(NpuError::AicoreException { detail, .. }) if detail.contains("block dim 64")
        ));
        assert_eq!(task.extra.op().unwrap().state, OpState::Faulted);
        assert_eq!(task.desc.block_dim, 1);
        assert_eq!(task.status, TaskStatus::Ready);
        assert_eq!(s.world.resource::<ShapeStats>().shape_faults, 1);
        assert!(s.world.resource::<ResolvedShapes>().launches.is_empty());
    }

    #[test]
    fn nothing_is_logged_when_the_tiling_log_is_off() {
        let mut s = setup();
        let k = register_add_op(&mut s.world);
        resolved_add(&mut s, k, 8, 0);
        run(&mut s.world, compute_tiling);
        assert!(s.world.resource::<TilingLog>().records.is_empty());
        assert_eq!(s.world.resource::<ShapeStats>().tilings, 1);
    }
}
