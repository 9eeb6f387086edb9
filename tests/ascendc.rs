//! Ascend C kernels (`examples/ascendc/*.cpp`, written against `device/sdk/ascendc/
//! kernel_operator.h` and built by `scripts/build-ascendc-kernels.sh`) run through the normal
//! launch API and match CPU references.

use npusim::device::core::npu::{f16_to_f32, f32_to_f16};
use npusim::prelude::*;

fn rt() -> Runtime {
    Runtime::new(RuntimeConfig::default()).unwrap()
}

fn load(rt: &Runtime, object: &str) -> Binary {
    let path = format!("{}/examples/ascendc/{object}", env!("CARGO_MANIFEST_DIR"));
    rt.load_binary_file(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn upload<T: bytemuck::Pod>(rt: &Runtime, data: &[T]) -> DevicePtr {
    let p = rt
        .malloc((std::mem::size_of_val(data) as u64).max(64))
        .unwrap();
    rt.memcpy_htod(p, data).unwrap();
    p
}

fn download<T: bytemuck::Pod + Default + Clone>(rt: &Runtime, p: DevicePtr, n: usize) -> Vec<T> {
    let mut out = vec![T::default(); n];
    rt.memcpy_dtoh(&mut out, p).unwrap();
    out
}

fn halves(v: &[f32]) -> Vec<u16> {
    v.iter().map(|&x| f32_to_f16(x)).collect()
}

/// Runs `kernel` on `blocks` blocks and returns the launch's simulated cycles.
fn run(rt: &Runtime, k: Kernel, blocks: u32, args: &[Arg], s: Stream) -> u64 {
    rt.launch(k, blocks, args, s).unwrap();
    rt.synchronize_stream(s).unwrap();
    rt.take_binary_launch_stats().pop().unwrap().cycles
}

const N: usize = 8 * 2048;

#[test]
fn the_half_add_sample_matches_the_cpu_bit_for_bit_single_and_double_buffered() {
    let rt = rt();
    let bin = load(&rt, "add_custom.o");
    let s = rt.create_stream().unwrap();
    let x: Vec<f32> = (0..N).map(|i| (i % 97) as f32 * 0.37 - 9.0).collect();
    let y: Vec<f32> = (0..N).map(|i| (i % 13) as f32 * 1.75 + 0.001).collect();
    let (hx, hy) = (halves(&x), halves(&y));
    let (dx, dy) = (upload(&rt, &hx), upload(&rt, &hy));
    let want: Vec<u16> = hx
        .iter()
        .zip(&hy)
        .map(|(&a, &b)| f32_to_f16(f16_to_f32(a) + f16_to_f32(b)))
        .collect();
    let mut cycles = Vec::new();
    for name in ["add_custom", "add_custom_single"] {
        let k = rt.get_function(bin, name).unwrap();
        let dz = rt.malloc(2 * N as u64).unwrap();
        cycles.push(run(&rt, k, 8, &[dx.into(), dy.into(), dz.into()], s));
        let z: Vec<u16> = download(&rt, dz, N);
        assert_eq!(z, want, "{name}");
    }
    // At the sample's shape (16 tiles of 128 halves per block) the scalar unit's queue
    // bookkeeping dominates, so buffering changes little; both finish within a few µs.
    assert!(cycles.iter().all(|&c| c > 0 && c < 20_000), "{cycles:?}");
}

#[test]
fn the_float_add_and_the_tiled_adds_match_the_cpu() {
    let rt = rt();
    let bin = load(&rt, "add_custom.o");
    let s = rt.create_stream().unwrap();
    let x: Vec<f32> = (0..N).map(|i| i as f32 * 0.25).collect();
    let y: Vec<f32> = (0..N).map(|i| 1000.0 - i as f32 * 0.5).collect();
    let (dx, dy) = (upload(&rt, &x), upload(&rt, &y));
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    let k = rt.get_function(bin, "add_custom_f32").unwrap();
    let dz = rt.malloc(4 * N as u64).unwrap();
    run(&rt, k, 8, &[dx.into(), dy.into(), dz.into()], s);
    assert_eq!(download::<f32>(&rt, dz, N), want);

    // Tiling by value: {totalLength, tileNum} packed in one register (LP64).
    let total = 3 * 4096usize;
    let k = rt.get_function(bin, "add_custom_tiling_f32").unwrap();
    let dz = rt.malloc(4 * total as u64).unwrap();
    let packed = total as u64 | 4 << 32;
    run(
        &rt,
        k,
        3,
        &[dx.into(), dy.into(), dz.into(), packed.into()],
        s,
    );
    assert_eq!(download::<f32>(&rt, dz, total), want[..total]);

    // Tiling through a device pointer, read with GET_TILING_DATA.
    let (hx, hy) = (halves(&x), halves(&y));
    let (hdx, hdy) = (upload(&rt, &hx), upload(&rt, &hy));
    let tiling = upload(&rt, &[N as u32, 2u32]);
    let k = rt.get_function(bin, "add_custom_tiling").unwrap();
    let dz = rt.malloc(2 * N as u64).unwrap();
    run(
        &rt,
        k,
        16,
        &[hdx.into(), hdy.into(), dz.into(), tiling.into()],
        s,
    );
    let z: Vec<u16> = download(&rt, dz, N);
    for i in 0..N {
        assert_eq!(
            z[i],
            f32_to_f16(f16_to_f32(hx[i]) + f16_to_f32(hy[i])),
            "[{i}]"
        );
    }
}

#[test]
fn a_tiling_that_does_not_divide_the_work_fails_the_launch_with_the_assert() {
    let rt = rt();
    let bin = load(&rt, "add_custom.o");
    let s = rt.create_stream().unwrap();
    let d = rt.malloc(4096).unwrap();
    let tiling = upload(&rt, &[1000u32, 3u32]);
    let k = rt.get_function(bin, "add_custom_tiling").unwrap();
    rt.launch(k, 2, &[d.into(), d.into(), d.into(), tiling.into()], s)
        .unwrap();
    let err = rt.synchronize_stream(s).unwrap_err();
    assert!(err.to_string().contains("134"), "{err}");
}
