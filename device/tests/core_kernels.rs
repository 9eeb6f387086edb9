//! Real compiled code: the C functions in `data/kernels.c`, built by clang for rv64imf/lp64f
//! (`data/build.sh`), run on the core and checked against Rust references.

use npusim_device::abi;
use npusim_device::core::{Core, CoreConfig, FlatBus, KernelArg, NpuCsrs, Program, RunStats};

const IMAGE: &[u8] = include_bytes!("data/kernels.bin");
const SYMS: &str = include_str!("data/kernels.syms");

fn entry(name: &str) -> u64 {
    SYMS.lines()
        .find_map(|l| {
            let (n, a) = l.split_once(' ')?;
            (n == name).then(|| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())?
        })
        .unwrap_or_else(|| panic!("no symbol {name}"))
}

struct Kernels {
    program: Program,
    core: Core,
    bus: FlatBus,
}

impl Kernels {
    fn new() -> Kernels {
        Kernels {
            program: Program::decode(abi::CODE_BASE, IMAGE),
            core: Core::new(CoreConfig::default()),
            bus: FlatBus::new(abi::HEAP_BASE, 1 << 20),
        }
    }

    fn call(&mut self, name: &str, args: &[KernelArg]) -> RunStats {
        self.call_with(name, args, NpuCsrs::default())
    }

    fn call_with(&mut self, name: &str, args: &[KernelArg], csrs: NpuCsrs) -> RunStats {
        self.core
            .run(
                &self.program,
                entry(name),
                args,
                csrs,
                &mut self.bus,
                100_000_000,
            )
            .unwrap_or_else(|t| panic!("{name}: {t}"))
    }

    fn a0(&self) -> u64 {
        self.core.x(10)
    }

    fn write(&mut self, addr: u64, data: &[u8]) {
        let o = (addr - abi::HEAP_BASE) as usize;
        self.bus.mem[o..o + data.len()].copy_from_slice(data);
    }

    fn read_u64(&self, addr: u64) -> u64 {
        let o = (addr - abi::HEAP_BASE) as usize;
        u64::from_le_bytes(self.bus.mem[o..o + 8].try_into().unwrap())
    }

    fn read_f32(&self, addr: u64) -> f32 {
        let o = (addr - abi::HEAP_BASE) as usize;
        f32::from_le_bytes(self.bus.mem[o..o + 4].try_into().unwrap())
    }
}

fn scalar_loop_ref(n: u64) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for i in 0..n {
        let t = a.wrapping_add(b);
        a = b;
        b = t ^ (i << 3) ^ (t >> 7);
        if b & 1 == 1 {
            a = a.wrapping_add(i);
        }
    }
    a ^ b
}

#[test]
fn scalar_loop_matches_rust_and_is_deterministic() {
    let mut k = Kernels::new();
    for n in [0, 1, 2, 17, 10_000] {
        let stats = k.call("scalar_loop", &[KernelArg::Int(n)]);
        assert_eq!(k.a0(), scalar_loop_ref(n), "n = {n}");
        let again = k.call("scalar_loop", &[KernelArg::Int(n)]);
        assert_eq!(stats, again);
    }
    // The loop body is 12 instructions; cycles follow the latency table.
    let s = k.call("scalar_loop", &[KernelArg::Int(1000)]);
    assert!(s.instructions > 12_000 && s.instructions < 12_100, "{s:?}");
    assert!(s.cycles > s.instructions);
    assert_eq!((s.bus_loads, s.bus_stores), (0, 0));
}

#[test]
fn sum_reads_an_array_through_the_bus() {
    let mut k = Kernels::new();
    let data: Vec<i32> = (0..1000).map(|i| (i * 7919) % 2001 - 1000).collect();
    let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    k.write(abi::HEAP_BASE, &bytes);
    let s = k.call(
        "sum_i32",
        &[KernelArg::ptr(abi::HEAP_BASE), KernelArg::i64(1000)],
    );
    assert_eq!(k.a0() as i64, data.iter().map(|&v| v as i64).sum::<i64>());
    assert_eq!(s.bus_loads, 1000);
}

#[test]
fn float_dot_product_matches_fused_rust() {
    let mut k = Kernels::new();
    let n = 257;
    let a: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
    let b: Vec<f32> = (0..n).map(|i| 1.0 / (1.0 + i as f32)).collect();
    let (pa, pb) = (abi::HEAP_BASE, abi::HEAP_BASE + 0x1000);
    k.write(
        pa,
        &a.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(),
    );
    k.write(
        pb,
        &b.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>(),
    );
    k.call(
        "dot",
        &[KernelArg::ptr(pa), KernelArg::ptr(pb), KernelArg::i32(n)],
    );
    // clang contracts `s += a[i] * b[i]` into fmadd.s: one rounding per step.
    let want = a.iter().zip(&b).fold(0.0f32, |s, (x, y)| x.mul_add(*y, s));
    assert_eq!(k.core.f32(10).to_bits(), want.to_bits());
}

#[test]
fn recursion_uses_the_local_stack() {
    let mut k = Kernels::new();
    let s = k.call("fib", &[KernelArg::i64(20)]);
    assert_eq!(k.a0(), 6765);
    assert_eq!(
        s.bus_loads + s.bus_stores,
        0,
        "the stack never goes to the bus"
    );
}

#[test]
fn twelve_mixed_arguments_arrive_in_registers() {
    let mut k = Kernels::new();
    let out = abi::HEAP_BASE;
    let args = [
        KernelArg::ptr(out),
        KernelArg::i32(-5),
        KernelArg::F32(1.25),
        KernelArg::i64(-1 << 40),
        KernelArg::F32(-2.5),
        KernelArg::u32(0xdead_beef),
        KernelArg::F32(3.0e-20),
        KernelArg::i64(i64::MAX),
        KernelArg::F32(f32::MAX),
        KernelArg::i32(i32::MIN),
        KernelArg::F32(-0.0),
        KernelArg::F32(7.0),
    ];
    k.call("args12", &args);
    assert_eq!(k.read_u64(out) as i64, -5);
    assert_eq!(k.read_u64(out + 8) as i64, -1 << 40);
    assert_eq!(
        k.read_u64(out + 16),
        0xdead_beef,
        "(int64_t) of an unsigned zero-extends"
    );
    assert_eq!(k.read_u64(out + 24) as i64, i64::MAX);
    assert_eq!(k.read_u64(out + 32) as i64, i32::MIN as i64);
    let floats: Vec<f32> = (0..6).map(|i| k.read_f32(out + 40 + 4 * i)).collect();
    assert_eq!(floats, [1.25, -2.5, 3.0e-20, f32::MAX, -0.0, 7.0]);
    assert!(floats[4].is_sign_negative());
}

#[test]
fn twenty_arguments_spill_to_integer_registers_and_the_stack() {
    let mut k = Kernels::new();
    let out = abi::HEAP_BASE;
    let mut args = vec![KernelArg::ptr(out)];
    let floats: Vec<f32> = (0..10).map(|i| i as f32 * 1.5 - 4.0).collect();
    args.extend(floats.iter().map(|&f| KernelArg::F32(f)));
    let ints: [i64; 10] = [-1, 2, -3, 4, -5, 6, -7, 8, -9, 10 << 33];
    for (i, &v) in ints.iter().enumerate() {
        // i4 and i7 are C `int`s.
        args.push(if i == 4 || i == 7 {
            KernelArg::i32(v as i32)
        } else {
            KernelArg::i64(v)
        });
    }
    k.call("spill20", &args);
    let got_f: Vec<f32> = (0..10).map(|i| k.read_f32(out + 4 * i)).collect();
    assert_eq!(got_f, floats);
    let got_i: Vec<i64> = (0..10)
        .map(|i| k.read_u64(out + 40 + 8 * i) as i64)
        .collect();
    assert_eq!(got_i, ints);
}

#[test]
fn kernels_read_launch_csrs_and_print() {
    let mut k = Kernels::new();
    let csrs = NpuCsrs {
        block_idx: 6,
        block_dim: 8,
        core_id: 1,
        tiling: 0,
        ..NpuCsrs::default()
    };
    k.call_with("hello", &[KernelArg::ptr(abi::HEAP_BASE)], csrs);
    assert_eq!(k.a0(), 608);
    assert_eq!(
        (k.read_u64(abi::HEAP_BASE), k.read_u64(abi::HEAP_BASE + 8)),
        (6, 8)
    );
    assert_eq!(k.core.output(), ["block ", "6"]);
}
