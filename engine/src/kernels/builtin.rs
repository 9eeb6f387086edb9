//! The built-in native kernels (see the table in the module above).

use npusim_components::{
    Access, AccessMode, AccessSet, KernelCtx, KernelFault, KernelRegistry, NativeKernel, Param,
};
use npusim_device::cost::KernelCost;

/// How many `f32` elements a buffer argument spans, from the launch's argument words.
#[derive(Clone, Copy)]
enum Count {
    /// The value of this argument.
    Arg(usize),
    /// The product of these two arguments.
    Product(usize, usize),
    /// A fixed number of bytes.
    Bytes(u64),
}

/// The access declaration of a kernel whose buffers are `(pointer argument, extent,
/// direction)`.
fn buffers(
    list: &'static [(usize, Count, AccessMode)],
) -> impl Fn(&[u64], u32, &mut AccessSet) + Send + Sync + 'static {
    move |args, _, out| {
        let arg = |i: usize| args.get(i).copied().unwrap_or(0);
        for &(ptr, count, mode) in list {
            let bytes = match count {
                Count::Arg(i) => arg(i).saturating_mul(4),
                Count::Product(i, j) => arg(i).saturating_mul(arg(j)).saturating_mul(4),
                Count::Bytes(b) => b,
            };
            out.push(Access {
                mode,
                ..Access::read(arg(ptr), bytes)
            });
        }
    }
}

use AccessMode::{Read as R, ReadWrite as RW, Write as W};
use Param::{Buffer as B, F32, I64, U64};

type KResult = Result<(), KernelFault>;

fn f32s(n: u64) -> f64 {
    n as f64 * 4.0
}

fn noop(_: &mut KernelCtx) -> KResult {
    Ok(())
}

fn fill(k: &mut KernelCtx) -> KResult {
    let (x, n, v) = (k.ptr(0)?, k.u64(1)?, k.f32(2)?);
    if n == 0 {
        return Ok(());
    }
    // The count comes from the launch: check the whole range before building anything for
    // it, then write in bounded pieces, so host memory stays small whatever `n` is.
    let bytes = n
        .checked_mul(4)
        .ok_or_else(|| KernelFault::BadArgs(format!("{n} elements overflow")))?;
    k.check(x, bytes)?;
    const PIECE: u64 = 1 << 16;
    let piece = vec![v; PIECE.min(n) as usize];
    let mut done = 0;
    while done < n {
        let m = PIECE.min(n - done);
        k.store(x + done * 4, &piece[..m as usize])?;
        done += m;
    }
    Ok(())
}

fn binary(k: &mut KernelCtx, op: impl Fn(f32, f32) -> f32) -> KResult {
    let (a, b, c, n) = (k.ptr(0)?, k.ptr(1)?, k.ptr(2)?, k.usize(3)?);
    let x = k.load::<f32>(a, n)?;
    let y = k.load::<f32>(b, n)?;
    let out: Vec<f32> = x.iter().zip(&y).map(|(p, q)| op(*p, *q)).collect();
    k.store(c, &out)
}

fn axpy(k: &mut KernelCtx) -> KResult {
    let (n, alpha, x, y) = (k.usize(0)?, k.f32(1)?, k.ptr(2)?, k.ptr(3)?);
    let xs = k.load::<f32>(x, n)?;
    let mut ys = k.load::<f32>(y, n)?;
    for (yv, xv) in ys.iter_mut().zip(&xs) {
        *yv += alpha * xv;
    }
    k.store(y, &ys)
}

fn relu(k: &mut KernelCtx) -> KResult {
    let (x, y, n) = (k.ptr(0)?, k.ptr(1)?, k.usize(2)?);
    let xs = k.load::<f32>(x, n)?;
    let out: Vec<f32> = xs.iter().map(|v| v.max(0.0)).collect();
    k.store(y, &out)
}

fn gemm(k: &mut KernelCtx) -> KResult {
    let (a, b, c) = (k.ptr(0)?, k.ptr(1)?, k.ptr(2)?);
    let (m, n, kk) = (k.usize(3)?, k.usize(4)?, k.usize(5)?);
    let size = |r: usize, c: usize| {
        r.checked_mul(c)
            .ok_or_else(|| KernelFault::BadArgs(format!("{r}x{c} overflows")))
    };
    let av = k.load::<f32>(a, size(m, kk)?)?;
    let bv = k.load::<f32>(b, size(kk, n)?)?;
    // Checks C's bounds before computing anything; C is only written (not read first).
    let cn = size(m, n)?;
    k.check(c, cn as u64 * 4)?;
    let mut cv = vec![0f32; cn];
    for i in 0..m {
        let row = &mut cv[i * n..(i + 1) * n];
        for p in 0..kk {
            let aip = av[i * kk + p];
            let brow = &bv[p * n..(p + 1) * n];
            for (cj, bj) in row.iter_mut().zip(brow) {
                *cj += aip * bj;
            }
        }
    }
    k.store(c, &cv)
}

fn softmax_rows(k: &mut KernelCtx) -> KResult {
    let (x, y, rows, cols) = (k.ptr(0)?, k.ptr(1)?, k.usize(2)?, k.usize(3)?);
    let n = rows
        .checked_mul(cols)
        .ok_or_else(|| KernelFault::BadArgs("rows x cols overflows".into()))?;
    let mut v = k.load::<f32>(x, n)?;
    for row in v.chunks_mut(cols.max(1)) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0.0;
        for e in row.iter_mut() {
            *e = (*e - max).exp();
            sum += *e;
        }
        for e in row.iter_mut() {
            *e /= sum;
        }
    }
    k.store(y, &v)
}

fn fault_bad_address(k: &mut KernelCtx) -> KResult {
    let p = k.ptr(0)?;
    k.load::<u32>(p, 1).map(|_| ())
}

fn fault_div_zero(k: &mut KernelCtx) -> KResult {
    let d = k.u64(0)? as i64;
    if d == 0 {
        return Err(KernelFault::DivideByZero);
    }
    std::hint::black_box(100i64 / d);
    Ok(())
}

fn fault_spin(_: &mut KernelCtx) -> KResult {
    Err(KernelFault::Timeout(
        "the kernel did not finish within its time budget".into(),
    ))
}

fn elementwise(flops_per: f64, words_per: f64, n_arg: usize) -> impl Fn(&[u64], u32) -> KernelCost {
    move |args, _| {
        let n = args.get(n_arg).copied().unwrap_or(0);
        KernelCost::vector(flops_per * n as f64, words_per * f32s(n))
    }
}

/// Registers every built-in kernel.
pub fn register_builtins(reg: &mut KernelRegistry) {
    reg.register(
        NativeKernel::new("noop", noop, |_, _| KernelCost::default())
            .with_access(buffers(&[]))
            .with_params(&[]),
    );
    reg.register(
        NativeKernel::new("fill_f32", fill, elementwise(0.0, 1.0, 1))
            .with_access(buffers(&[(0, Count::Arg(1), W)]))
            .with_params(&[B, U64, F32]),
    );
    const BINARY: &[(usize, Count, AccessMode)] = &[
        (0, Count::Arg(3), R),
        (1, Count::Arg(3), R),
        (2, Count::Arg(3), W),
    ];
    reg.register(
        NativeKernel::new(
            "vector_add_f32",
            |k| binary(k, |a, b| a + b),
            elementwise(1.0, 3.0, 3),
        )
        .with_access(buffers(BINARY))
        .with_params(&[B, B, B, U64]),
    );
    reg.register(
        NativeKernel::new(
            "vector_mul_f32",
            |k| binary(k, |a, b| a * b),
            elementwise(1.0, 3.0, 3),
        )
        .with_access(buffers(BINARY))
        .with_params(&[B, B, B, U64]),
    );
    reg.register(
        NativeKernel::new("axpy_f32", axpy, elementwise(2.0, 3.0, 0))
            .with_access(buffers(&[(2, Count::Arg(0), R), (3, Count::Arg(0), RW)]))
            .with_params(&[U64, F32, B, B]),
    );
    reg.register(
        NativeKernel::new("relu_f32", relu, elementwise(1.0, 2.0, 2))
            .with_access(buffers(&[(0, Count::Arg(2), R), (1, Count::Arg(2), W)]))
            .with_params(&[B, B, U64]),
    );
    reg.register(
        NativeKernel::new("gemm_f32", gemm, |a, _| {
            let (m, n, k) = (
                a.get(3).copied().unwrap_or(0),
                a.get(4).copied().unwrap_or(0),
                a.get(5).copied().unwrap_or(0),
            );
            let (m, n, k) = (m as f64, n as f64, k as f64);
            KernelCost::cube_f32(2.0 * m * n * k, 4.0 * (m * k + k * n + m * n))
        })
        .with_access(buffers(&[
            (0, Count::Product(3, 5), R),
            (1, Count::Product(5, 4), R),
            (2, Count::Product(3, 4), W),
        ]))
        .with_params(&[B, B, B, U64, U64, U64]),
    );
    reg.register(
        NativeKernel::new("softmax_rows_f32", softmax_rows, |a, _| {
            let n = a
                .get(2)
                .copied()
                .unwrap_or(0)
                .saturating_mul(a.get(3).copied().unwrap_or(0));
            KernelCost::vector(5.0 * n as f64, 2.0 * f32s(n))
        })
        .with_access(buffers(&[
            (0, Count::Product(2, 3), R),
            (1, Count::Product(2, 3), W),
        ]))
        .with_params(&[B, B, U64, U64]),
    );
    reg.register(
        NativeKernel::new("fault_bad_address", fault_bad_address, |_, _| {
            KernelCost::default()
        })
        .with_access(buffers(&[(0, Count::Bytes(4), R)]))
        .with_params(&[B]),
    );
    reg.register(
        NativeKernel::new("fault_div_zero", fault_div_zero, |_, _| {
            KernelCost::default()
        })
        .with_access(buffers(&[]))
        .with_params(&[I64]),
    );
    reg.register(
        NativeKernel::new("fault_spin", fault_spin, |_, _| {
            KernelCost::vector(1e12, 0.0)
        })
        .with_access(buffers(&[]))
        .with_params(&[]),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy_ecs::entity::Entity;
    use npusim_components::{DeviceMemory, KernelBody};
    use npusim_device::config::DeviceConfig;

    /// Runs `name` with `args` (pointers into a fresh context) and checks that every byte it
    /// loaded or stored lies in a range its declaration names with that direction.
    fn declared_covers_touched(name: &str, sizes: &[u64], scalars: &[u64]) {
        let mut reg = KernelRegistry::default();
        register_builtins(&mut reg);
        let k = reg.get(reg.lookup(name).unwrap()).unwrap();
        let KernelBody::Native(k) = &k.body else {
            panic!("{name} is native")
        };
        let ctx = Entity::from_raw_u32(1).unwrap();
        let mut mem = DeviceMemory::new(1 << 30).unwrap();
        mem.create_space(ctx).unwrap();
        let mut args: Vec<u64> = sizes.iter().map(|&b| mem.alloc(b, ctx).unwrap()).collect();
        args.extend_from_slice(scalars);
        let mut declared = AccessSet::new();
        k.accesses(&args, 0, 1, &mut declared);
        assert!(declared.exact(), "{name} declares exact ranges");
        let config = DeviceConfig::small();
        let mut kctx = KernelCtx::new(&args, 1, &[], &config, ctx, &mut mem);
        (k.run)(&mut kctx).unwrap();
        for t in kctx.touched().ranges() {
            let covered = declared.ranges().iter().any(|d| {
                d.addr <= t.addr
                    && t.end() <= d.end()
                    && (!t.mode.reads() || d.mode.reads())
                    && (!t.mode.writes() || d.mode.writes())
            });
            assert!(covered, "{name}: {t:?} is not declared in {declared:?}");
        }
        assert!(!kctx.touched().is_empty() || declared.is_empty());
    }

    #[test]
    fn builtin_kernels_declare_what_they_touch() {
        // (kernel, buffer sizes in bytes, then scalar arguments)
        declared_covers_touched("noop", &[], &[]);
        declared_covers_touched("fill_f32", &[400], &[100, 1.5f32.to_bits() as u64]);
        declared_covers_touched("vector_add_f32", &[400, 400, 400], &[100]);
        declared_covers_touched("vector_mul_f32", &[400, 400, 400], &[100]);
        // axpy(n, alpha, x, y): the buffers come after the scalars.
        let mut reg = KernelRegistry::default();
        register_builtins(&mut reg);
        declared_covers_axpy(&reg);
        declared_covers_touched("relu_f32", &[400, 400], &[100]);
        declared_covers_touched("gemm_f32", &[4 * 6, 4 * 12, 4 * 8], &[2, 4, 3]);
        declared_covers_touched("softmax_rows_f32", &[4 * 12, 4 * 12], &[3, 4]);
    }

    fn declared_covers_axpy(reg: &KernelRegistry) {
        let k = reg.get(reg.lookup("axpy_f32").unwrap()).unwrap();
        let KernelBody::Native(k) = &k.body else {
            panic!("native")
        };
        let ctx = Entity::from_raw_u32(1).unwrap();
        let mut mem = DeviceMemory::new(1 << 30).unwrap();
        mem.create_space(ctx).unwrap();
        let (x, y) = (mem.alloc(400, ctx).unwrap(), mem.alloc(400, ctx).unwrap());
        let args = [100, 2.0f32.to_bits() as u64, x, y];
        let mut declared = AccessSet::new();
        k.accesses(&args, 0, 1, &mut declared);
        let config = DeviceConfig::small();
        let mut kctx = KernelCtx::new(&args, 1, &[], &config, ctx, &mut mem);
        (k.run)(&mut kctx).unwrap();
        let touched = kctx.touched().clone();
        assert!(touched.ranges().iter().all(|t| {
            declared
                .ranges()
                .iter()
                .any(|d| d.addr <= t.addr && t.end() <= d.end())
        }));
        assert_eq!(declared.ranges()[1].mode, AccessMode::ReadWrite);
    }
}
