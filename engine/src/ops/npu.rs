//! The Ascend-style kernels of `examples/kernels/ext_*.c` as ops: each binary kernel gets shape
//! inference and a Rust tiling function (the planners of `npusim_device::core::npu::tiling`),
//! so it is launched with [`LaunchOp`](crate::LaunchOp) exactly like a native op — dynamic shapes
//! included: the tiling stage of the frame plans its tiles from the actual shapes, and the
//! kernel reads them through the `npu.tiling` CSR.

use std::path::Path;

use npusim_components::shape::{Shape, Tiling};
use npusim_components::{Kernel, NpuResult};
use npusim_device::config::DeviceConfig;
use npusim_device::core::NpuConfig;
use npusim_device::core::npu::tiling::{self, Buffering};
use npusim_device::cost::{ComputeUnit, KernelCost};

use super::OpBuilder;
use super::Ops;
use crate::runtime::Runtime;

/// The kernel ids of the registered Ascend-style ops.
#[derive(Clone, Copy, Debug)]
pub struct NpuOps {
    /// `npu_vadd_f32(x[n], y[n]) -> z[n]`, double-buffered.
    pub vadd: Kernel,
    /// `npu_softmax_f32(x[rows, cols]) -> y[rows, cols]`, softmax of each row.
    pub softmax: Kernel,
    /// `npu_layernorm_f32(x[rows, cols], gamma[cols], beta[cols]; eps) -> y[rows, cols]`.
    pub layernorm: Kernel,
    /// `npu_matmul_f16(a[m, k], b[k, n]) -> c[m, n]`: f16 inputs, f32 output, on the cube.
    pub matmul: Kernel,
}

fn tiling_of<T: bytemuck::Pod>(blocks: u32, t: &T) -> Tiling {
    bytemuck::cast_slice::<u8, u32>(bytemuck::bytes_of(t))
        .iter()
        .fold(Tiling::new(blocks, 0), |acc, &w| acc.push(w))
}

fn two_d(s: &Shape) -> Result<(u64, u64), String> {
    match s.dims() {
        [r, c] => Ok((*r, *c)),
        d => Err(format!("expected a 2-D tensor, got rank {}", d.len())),
    }
}

fn blocks_for(work: u64, dev: &DeviceConfig) -> u32 {
    work.clamp(1, dev.ai_cores.max(1) as u64) as u32
}

/// The kernel objects and functions the Ascend-style ops run, in [`NpuOps`] order.
const NPU_KERNELS: [(&str, &str); 4] = [
    ("ext_vadd.o", "ext_vadd_double"),
    ("ext_softmax.o", "ext_softmax"),
    ("ext_layernorm.o", "ext_layernorm"),
    ("ext_matmul.o", "ext_matmul_f16"),
];

impl Runtime {
    /// Registers the Ascend-style ops over `functions`, the kernels of [`NPU_KERNELS`] in
    /// their order (unrecorded: [`Ops::register_npu`](crate::Ops::register_npu) records itself).
    pub(crate) fn npu_ops_with(&self, functions: [Kernel; 4]) -> NpuResult<NpuOps> {
        let [vadd_fn, softmax_fn, layernorm_fn, matmul_fn] = functions;
        let same_shape = |ins: &[Shape], _: &[u64], outs: &mut [Shape]| -> Result<(), String> {
            outs[0] = ins[0];
            Ok(())
        };

        let vadd = self.add_op(
            OpBuilder::new("npu_vadd_f32")
                .input("x", 4)
                .input("y", 4)
                .output("z", 4)
                .infer(|ins, _, outs| {
                    if ins[0].numel() != ins[1].numel() {
                        return Err("x and y differ in size".into());
                    }
                    outs[0] = ins[0];
                    Ok(())
                })
                .tiling(|s, dev| {
                    let n = s.inputs[0].numel();
                    let blocks = blocks_for(n / 4096, dev);
                    let t =
                        tiling::vadd(n, blocks, Buffering::Double, &NpuConfig::from_device(dev));
                    Ok(tiling_of(blocks, &t).with_buffers(24 * t.tile as u64, 0))
                })
                .cost(|s, _| {
                    let n = s.inputs[0].numel() as f64;
                    KernelCost::vector(n, 12.0 * n)
                })
                .binary_kernel(vadd_fn),
        )?;

        let softmax = self.add_op(
            OpBuilder::new("npu_softmax_f32")
                .input("x", 4)
                .output("y", 4)
                .infer(same_shape)
                .tiling(|s, dev| {
                    let (rows, cols) = two_d(&s.inputs[0])?;
                    let blocks = blocks_for(rows, dev);
                    let t = tiling::softmax(rows, cols, blocks, &NpuConfig::from_device(dev))
                        .map_err(|e| e.to_string())?;
                    Ok(tiling_of(blocks, &t))
                })
                .cost(|s, _| {
                    let n = s.inputs[0].numel() as f64;
                    KernelCost::vector(5.0 * n, 8.0 * n)
                })
                .binary_kernel(softmax_fn),
        )?;

        let layernorm = self.add_op(
            OpBuilder::new("npu_layernorm_f32")
                .input("x", 4)
                .input("gamma", 4)
                .input("beta", 4)
                .output("y", 4)
                .attr("eps")
                .infer(same_shape)
                .tiling(|s, dev| {
                    let (rows, cols) = two_d(&s.inputs[0])?;
                    let blocks = blocks_for(rows, dev);
                    let t = tiling::layernorm(
                        rows,
                        cols,
                        s.attr_f32(0),
                        blocks,
                        &NpuConfig::from_device(dev),
                    )
                    .map_err(|e| e.to_string())?;
                    Ok(tiling_of(blocks, &t))
                })
                .cost(|s, _| {
                    let n = s.inputs[0].numel() as f64;
                    KernelCost::vector(8.0 * n, 8.0 * n)
                })
                .binary_kernel(layernorm_fn),
        )?;

        let matmul = self.add_op(
            OpBuilder::new("npu_matmul_f16")
                .input("a", 2)
                .input("b", 2)
                .output("c", 4)
                .infer(|ins, _, outs| {
                    let (m, k) = two_d(&ins[0])?;
                    let (k2, n) = two_d(&ins[1])?;
                    if k != k2 {
                        return Err(format!("inner dimensions differ: {k} and {k2}"));
                    }
                    outs[0] = Shape::new(&[m, n]).map_err(|e| e.to_string())?;
                    Ok(())
                })
                .tiling(|s, dev| {
                    let (m, k) = two_d(&s.inputs[0])?;
                    let (_, n) = two_d(&s.inputs[1])?;
                    let blocks = blocks_for(m.div_ceil(16) * n.div_ceil(16), dev);
                    let t = tiling::matmul(m, n, k, blocks, &NpuConfig::from_device(dev))
                        .map_err(|e| e.to_string())?;
                    Ok(tiling_of(blocks, &t))
                })
                .cost(|s, _| {
                    let (m, k) = (s.inputs[0].dims()[0] as f64, s.inputs[0].dims()[1] as f64);
                    let n = s.inputs[1].dims()[1] as f64;
                    KernelCost {
                        flops: 2.0 * m * n * k,
                        bytes: 2.0 * (m * k + k * n) + 4.0 * m * n,
                        unit: ComputeUnit::CubeF16,
                    }
                })
                .binary_kernel(matmul_fn),
        )?;
        Ok(NpuOps {
            vadd,
            softmax,
            layernorm,
            matmul,
        })
    }
}

impl Ops<'_> {
    /// Loads the Ascend-style kernel objects from `dir` (the committed `examples/kernels/`)
    /// into the current context and registers them as ops with their tiling functions.
    pub fn register_npu(&self, dir: impl AsRef<Path>) -> NpuResult<NpuOps> {
        let dir = dir.as_ref();
        let load = |i: usize| -> NpuResult<Kernel> {
            let (object, name) = NPU_KERNELS[i];
            let bin = self.rt.binaries().load_file(dir.join(object))?;
            self.rt.binaries().get_function(bin, name)
        };
        let functions = [load(0)?, load(1)?, load(2)?, load(3)?];
        let ops = self.rt.npu_ops_with(functions)?;
        // The binaries' loads are recorded; this names the functions the ops run.
        self.rt
            .lock()
            .record(|r, _| crate::record::Call::RegisterNpuOps {
                functions: functions.iter().filter_map(|&k| r.function(k)).collect(),
            });
        Ok(ops)
    }
}
