//! The scalar core, one instruction class at a time, against Rust reference semantics.

mod core_asm;

use core_asm::*;
use npusim_device::abi;
use npusim_device::core::{CoreConfig, DEFAULT_LATENCIES, Trap};

/// Edge values plus a deterministic pseudo-random spread.
fn values() -> Vec<u64> {
    let mut v = vec![
        0,
        1,
        2,
        u64::MAX,
        u64::MAX - 1,
        i64::MIN as u64,
        i64::MAX as u64,
        0x8000_0000,
        0x7fff_ffff,
        0xffff_ffff,
        0xffff_ffff_8000_0000,
        0x1_0000_0000,
        63,
        64,
        31,
        32,
    ];
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..16 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.push(s);
    }
    v
}

fn sext32(v: u64) -> u64 {
    v as u32 as i32 as i64 as u64
}

type Ref = fn(u64, u64) -> u64;

#[test]
fn register_register_ops_match_the_reference() {
    let table: &[(&str, Ref)] = &[
        ("add", |a, b| a.wrapping_add(b)),
        ("sub", |a, b| a.wrapping_sub(b)),
        ("sll", |a, b| a << (b & 63)),
        ("slt", |a, b| ((a as i64) < (b as i64)) as u64),
        ("sltu", |a, b| (a < b) as u64),
        ("xor", |a, b| a ^ b),
        ("srl", |a, b| a >> (b & 63)),
        ("sra", |a, b| ((a as i64) >> (b & 63)) as u64),
        ("or", |a, b| a | b),
        ("and", |a, b| a & b),
        ("addw", |a, b| sext32(a.wrapping_add(b))),
        ("subw", |a, b| sext32(a.wrapping_sub(b))),
        ("sllw", |a, b| sext32(((a as u32) << (b & 31)) as u64)),
        ("srlw", |a, b| sext32(((a as u32) >> (b & 31)) as u64)),
        ("sraw", |a, b| ((a as i32) >> (b & 31)) as i64 as u64),
        ("mul", |a, b| a.wrapping_mul(b)),
        ("mulh", |a, b| {
            ((a as i64 as i128 * b as i64 as i128) >> 64) as u64
        }),
        ("mulhsu", |a, b| {
            ((a as i64 as i128 * b as i128) >> 64) as u64
        }),
        ("mulhu", |a, b| ((a as u128 * b as u128) >> 64) as u64),
        ("mulw", |a, b| {
            (a as i32).wrapping_mul(b as i32) as i64 as u64
        }),
    ];
    let vals = values();
    for (name, f) in table {
        for &a in &vals {
            for &b in vals.iter().step_by(3) {
                let ran = run_regs(&[(A0, a), (A1, b)], &[op(name, A2, A0, A1)]);
                assert_eq!(ran.x(A2), f(a, b), "{name} {a:#x} {b:#x}");
            }
        }
    }
}

#[test]
fn division_matches_the_reference_including_overflow() {
    let table: &[(&str, Ref)] = &[
        ("div", |a, b| (a as i64).wrapping_div(b as i64) as u64),
        ("divu", |a, b| a / b),
        ("rem", |a, b| (a as i64).wrapping_rem(b as i64) as u64),
        ("remu", |a, b| a % b),
        ("divw", |a, b| {
            (a as i32).wrapping_div(b as i32) as i64 as u64
        }),
        ("divuw", |a, b| sext32(((a as u32) / (b as u32)) as u64)),
        ("remw", |a, b| {
            (a as i32).wrapping_rem(b as i32) as i64 as u64
        }),
        ("remuw", |a, b| sext32(((a as u32) % (b as u32)) as u64)),
    ];
    let vals = values();
    for (name, f) in table {
        for &a in &vals {
            for &b in &vals {
                let word = name.ends_with('w');
                if (word && b as u32 == 0) || b == 0 {
                    continue;
                }
                let ran = run_regs(&[(A0, a), (A1, b)], &[op(name, A2, A0, A1)]);
                assert_eq!(ran.x(A2), f(a, b), "{name} {a:#x} {b:#x}");
            }
        }
    }
    // The overflow cases explicitly: MIN / -1 = MIN, MIN % -1 = 0.
    let ran = run_regs(
        &[(A0, i64::MIN as u64), (A1, u64::MAX)],
        &[op("div", A2, A0, A1), op("rem", A3, A0, A1)],
    );
    assert_eq!((ran.x(A2), ran.x(A3)), (i64::MIN as u64, 0));
    let ran = run_regs(
        &[(A0, 0x8000_0000), (A1, u64::MAX)],
        &[op("divw", A2, A0, A1), op("remw", A3, A0, A1)],
    );
    assert_eq!((ran.x(A2), ran.x(A3)), (0xffff_ffff_8000_0000, 0));
}

#[test]
fn immediate_ops_sign_extend_their_immediate() {
    let table: &[(&str, i32, Ref)] = &[
        ("addi", -1, |a, i| a.wrapping_add(i)),
        ("slti", -5, |a, i| ((a as i64) < (i as i64)) as u64),
        ("sltiu", -1, |a, i| (a < i) as u64),
        ("xori", -1, |a, i| a ^ i),
        ("ori", 0x7ff, |a, i| a | i),
        ("andi", -2048, |a, i| a & i),
        ("slli", 63, |a, i| a << i),
        ("srli", 33, |a, i| a >> i),
        ("srai", 63, |a, i| ((a as i64) >> i) as u64),
        ("addiw", 0x7ff, |a, i| sext32(a.wrapping_add(i))),
        ("slliw", 31, |a, i| sext32(((a as u32) << i) as u64)),
        ("srliw", 1, |a, i| sext32(((a as u32) >> i) as u64)),
        ("sraiw", 17, |a, i| ((a as i32) >> i) as i64 as u64),
    ];
    for (name, imm, f) in table {
        for &a in &values() {
            let ran = run_regs(&[(A0, a)], &[opi(name, A2, A0, *imm)]);
            assert_eq!(ran.x(A2), f(a, *imm as i64 as u64), "{name} {a:#x} {imm}");
        }
    }
}

#[test]
fn lui_auipc_and_x0_behave() {
    let ran = run(&[
        lui(A0, 0x80000),        // sign-extended
        0x0000_0597 | (1 << 12), // auipc a1, 1
        addi(ZERO, ZERO, 5),     // writes to x0 vanish
        op("add", A2, ZERO, ZERO),
    ]);
    assert_eq!(ran.x(A0), 0xffff_ffff_8000_0000);
    assert_eq!(ran.x(A1), abi::CODE_BASE + 4 + 0x1000);
    assert_eq!(ran.x(A2), 0);
}

#[test]
fn li_helper_builds_any_constant() {
    for &v in &values() {
        assert_eq!(run(&li(A0, v)).x(A0), v, "{v:#x}");
    }
}

#[test]
fn branches_follow_signedness_and_cost_more_when_taken() {
    let cases: &[(&str, u64, u64, bool)] = &[
        ("beq", 5, 5, true),
        ("beq", 5, 6, false),
        ("bne", 5, 6, true),
        ("blt", u64::MAX, 0, true), // -1 < 0
        ("bltu", u64::MAX, 0, false),
        ("bge", 0, u64::MAX, true),
        ("bgeu", 0, u64::MAX, false),
        ("bge", 7, 7, true),
        ("bltu", 1, 2, true),
    ];
    for &(name, a, b, taken) in cases {
        // a2 = 1 if the branch falls through, 2 if taken.
        let ran = run_regs(
            &[(A0, a), (A1, b)],
            &[
                branch(name, A0, A1, 12),
                addi(A2, ZERO, 1),
                jal(ZERO, 8),
                addi(A2, ZERO, 2),
            ],
        );
        assert_eq!(ran.x(A2), if taken { 2 } else { 1 }, "{name} {a:#x} {b:#x}");
    }
    let lat = DEFAULT_LATENCIES;
    let fall = run(&[
        branch("beq", ZERO, A0, 8),
        addi(ZERO, ZERO, 0),
        addi(ZERO, ZERO, 0),
    ]);
    let taken = run(&[
        branch("beq", ZERO, ZERO, 8),
        addi(ZERO, ZERO, 0),
        addi(ZERO, ZERO, 0),
    ]);
    // beq (+nop when falling through) + nop + ret.
    assert_eq!(
        fall.ok().cycles,
        (lat.branch_not_taken + 2 * lat.alu + lat.jump) as u64
    );
    assert_eq!(
        taken.ok().cycles,
        (lat.branch_taken + lat.alu + lat.jump) as u64
    );
    assert_eq!(taken.ok().instructions, 3);
}

#[test]
fn jal_and_jalr_link_and_clear_bit_zero() {
    let ran = run(&[
        jal(T0, 8), // skip one, t0 = base + 4
        addi(A0, ZERO, 99),
        0x0000_0317,      // auipc t1, 0   (base + 8)
        jalr(T1, T1, 13), // to base + 8 + 13 & !1 = base + 20, t1 = base + 16
        addi(A0, ZERO, 98),
        addi(A1, ZERO, 1),
    ]);
    assert_eq!(ran.x(A0), 0);
    assert_eq!(ran.x(A1), 1);
    assert_eq!(ran.x(T0), abi::CODE_BASE + 4);
    assert_eq!(ran.x(T1), abi::CODE_BASE + 16);
}

#[test]
fn loads_sign_and_zero_extend_through_bus_and_stack() {
    let pattern = 0xf1e2_d3c4_b5a6_9788u64;
    for base in [abi::HEAP_BASE + 64, abi::LOCAL_BASE + 0x100] {
        let mut words = li(A0, base);
        words.extend(li(A1, pattern));
        words.extend([
            store("sd", A0, A1, 0),
            load("lb", 20, A0, 0),
            load("lbu", 21, A0, 0),
            load("lh", 22, A0, 6),
            load("lhu", 23, A0, 6),
            load("lw", 24, A0, 4),
            load("lwu", 25, A0, 4),
            load("ld", 26, A0, 0),
            store("sb", A0, A1, 8),
            store("sh", A0, A1, 10),
            store("sw", A0, A1, 12),
            load("ld", 27, A0, 8),
        ]);
        let ran = run(&words);
        assert_eq!(ran.x(20), 0xffff_ffff_ffff_ff88);
        assert_eq!(ran.x(21), 0x88);
        assert_eq!(ran.x(22), 0xffff_ffff_ffff_f1e2);
        assert_eq!(ran.x(23), 0xf1e2);
        assert_eq!(ran.x(24), 0xffff_ffff_f1e2_d3c4);
        assert_eq!(ran.x(25), 0xf1e2_d3c4);
        assert_eq!(ran.x(26), pattern);
        assert_eq!(ran.x(27), 0xb5a6_9788_9788_0088);
        let on_bus = base >= abi::HEAP_BASE;
        assert_eq!(ran.ok().bus_loads > 0, on_bus);
        assert_eq!(ran.ok().bus_stores > 0, on_bus);
        if on_bus {
            assert_eq!(ran.bus.mem[64..72], pattern.to_le_bytes());
        } else {
            assert_eq!(ran.core.local()[0x100..0x108], pattern.to_le_bytes());
        }
    }
}

#[test]
fn stack_pointer_starts_at_the_top_of_local_memory() {
    let ran = run(&[
        addi(A0, SP, 0),
        store("sd", SP, RA, -8),
        load("ld", A1, SP, -8),
    ]);
    assert_eq!(ran.x(A0), abi::LOCAL_BASE + abi::LOCAL_STACK_SIZE);
    assert_eq!(ran.x(A0) % 16, 0);
    assert_eq!(ran.x(A1), abi::EXIT_PC);
    assert_eq!(ran.ok().bus_loads + ran.ok().bus_stores, 0);
}

#[test]
fn npu_csrs_and_counters_read_back() {
    let ran = run(&[
        csrr(A0, abi::CSR_BLOCK_IDX),
        csrr(A1, abi::CSR_BLOCK_DIM),
        csrr(A2, abi::CSR_CORE_ID),
        csrr(A3, abi::CSR_TILING),
        csrr(20, abi::CSR_INSTRET),
        csrr(21, abi::CSR_CYCLE),
        csrr(22, abi::CSR_TIME),
    ]);
    assert_eq!((ran.x(A0), ran.x(A1), ran.x(A2)), (3, 8, 5));
    assert_eq!(ran.x(A3), abi::HEAP_BASE + 0x100);
    assert_eq!(
        ran.x(20),
        4,
        "instret counts the instructions before the read"
    );
    assert_eq!(ran.x(21), 5);
    assert_eq!(ran.x(22), 6);
}

#[test]
fn read_only_and_unknown_csrs_are_illegal() {
    for word in [
        csrw(abi::CSR_BLOCK_IDX, A0),
        csrw(abi::CSR_CYCLE, A0),
        csr(6, 0, 1, abi::CSR_CORE_ID), // csrrsi with a nonzero immediate writes
        csrr(A0, 0x300),                // mstatus: machine mode only exists in test mode
        csrw(0x7c0, A0),
    ] {
        let t = run(&[word]).trap();
        assert_eq!(
            t,
            Trap::IllegalInstruction {
                pc: abi::CODE_BASE,
                bits: word
            }
        );
    }
    // Setting no bits of a read-only CSR is a plain read.
    assert!(run(&[csr(2, A0, 0, abi::CSR_BLOCK_DIM)]).result.is_ok());
}

#[test]
fn fcsr_fields_alias() {
    let ran = run(&[
        addi(A0, ZERO, 0xff),
        csrw(0x003, A0),      // fcsr = 0xff
        csrr(A1, 0x001),      // fflags = 0x1f
        csrr(A2, 0x002),      // frm = 7
        csr(5, A3, 2, 0x002), // csrrwi frm, 2 -> a3 = old frm
        csrr(20, 0x003),
    ]);
    assert_eq!(
        (ran.x(A1), ran.x(A2), ran.x(A3), ran.x(20)),
        (0x1f, 7, 7, 0x5f)
    );
}

/// Runs one single-precision operation: `fa0 = op(fa1, fa2, fa3)` under rounding-mode field
/// `rm` (dynamic modes read `frm_val`), returns (result bits, fflags).
fn fp_run(word: u32, a: f32, b: f32, c: f32) -> (u32, u64) {
    let mut w = Vec::new();
    for (reg, v) in [(11, a), (12, b), (13, c)] {
        w.extend(li(T0, v.to_bits() as u64));
        w.push(fmv_w_x(reg, T0));
    }
    w.push(word);
    w.push(fmv_x_w(A0, 10));
    w.push(csrr(A1, 0x001));
    let ran = run(&w);
    (ran.x(A0) as u32, ran.x(A1))
}

const NV: u64 = 0x10;
const DZ: u64 = 0x08;
const OF: u64 = 0x04;
const UF: u64 = 0x02;
const NX: u64 = 0x01;

#[test]
fn fp_arithmetic_rounds_per_mode_and_sets_flags() {
    let third = 1.0f32 / 3.0;
    // fdiv.s fa0, fa1, fa2
    let div = |rm| fp(0x0c, rm, 10, 11, 12);
    assert_eq!(fp_run(div(RNE), 1.0, 3.0, 0.0), (third.to_bits(), NX));
    assert_eq!(fp_run(div(RTZ), 1.0, 3.0, 0.0), (third.to_bits() - 1, NX));
    assert_eq!(fp_run(div(RDN), -1.0, 3.0, 0.0), ((-third).to_bits(), NX));
    assert_eq!(
        fp_run(div(RUP), -1.0, 3.0, 0.0),
        ((-third).to_bits() - 1, NX)
    );
    assert_eq!(
        fp_run(div(RNE), 1.0, 0.0, 0.0),
        (f32::INFINITY.to_bits(), DZ)
    );
    assert_eq!(fp_run(div(RNE), 0.0, 0.0, 0.0), (0x7fc0_0000, NV));
    // fadd.s: exact, tie, overflow.
    let add = |rm| fp(0x00, rm, 10, 11, 12);
    assert_eq!(fp_run(add(RNE), 1.5, 2.25, 0.0), (3.75f32.to_bits(), 0));
    let half_ulp = 2f32.powi(-24);
    assert_eq!(fp_run(add(RNE), 1.0, half_ulp, 0.0), (1f32.to_bits(), NX));
    assert_eq!(
        fp_run(add(RMM), 1.0, half_ulp, 0.0),
        (1f32.to_bits() + 1, NX)
    );
    assert_eq!(
        fp_run(add(RNE), f32::MAX, f32::MAX, 0.0),
        (f32::INFINITY.to_bits(), OF | NX)
    );
    assert_eq!(
        fp_run(add(RTZ), f32::MAX, f32::MAX, 0.0),
        (f32::MAX.to_bits(), OF | NX)
    );
    assert_eq!(fp_run(add(RDN), 1.0, -1.0, 0.0), ((-0.0f32).to_bits(), 0));
    // fsub.s and fmul.s.
    assert_eq!(fp_run(fp(0x04, RNE, 10, 11, 12), 1.0, 1.0, 0.0), (0, 0));
    assert_eq!(
        fp_run(fp(0x08, RNE, 10, 11, 12), 1e-30, 1e-30, 0.0),
        (0, UF | NX)
    );
    // fsqrt.s
    assert_eq!(
        fp_run(fp(0x2c, RNE, 10, 11, 0), 2.0, 0.0, 0.0),
        (2f32.sqrt().to_bits(), NX)
    );
    assert_eq!(
        fp_run(fp(0x2c, RNE, 10, 11, 0), -2.0, 0.0, 0.0),
        (0x7fc0_0000, NV)
    );
}

#[test]
fn dynamic_rounding_uses_frm_and_rejects_reserved_values() {
    let mut w = li(T0, 1); // frm = RTZ
    w.push(csrw(0x002, T0));
    for (reg, v) in [(11, 1.0f32), (12, 3.0f32)] {
        w.extend(li(T0, v.to_bits() as u64));
        w.push(fmv_w_x(reg, T0));
    }
    w.push(fp(0x0c, DYN, 10, 11, 12));
    w.push(fmv_x_w(A0, 10));
    let ran = run(&w);
    assert_eq!(ran.x(A0) as u32, (1.0f32 / 3.0).to_bits() - 1);

    let mut w = li(T0, 5); // reserved
    w.push(csrw(0x002, T0));
    let div = fp(0x0c, DYN, 10, 11, 12);
    w.push(div);
    let pc = abi::CODE_BASE + 4 * (w.len() as u64 - 1);
    assert_eq!(run(&w).trap(), Trap::IllegalInstruction { pc, bits: div });
}

#[test]
fn fused_multiply_add_rounds_once() {
    // (1 + 2^-23)(1 - 2^-23) - 1 = -2^-46 exactly; a separate multiply would round to 0.
    let a = 1.0 + f32::EPSILON;
    let b = 1.0 - f32::EPSILON;
    assert_eq!(
        fp_run(fma(0x43, 10, 11, 12, 13, RNE), a, b, -1.0),
        ((-(2f32.powi(-46))).to_bits(), 0)
    );
    // fmsub, fnmsub, fnmadd signs.
    assert_eq!(
        fp_run(fma(0x47, 10, 11, 12, 13, RNE), 2.0, 3.0, 1.0).0,
        5f32.to_bits()
    );
    assert_eq!(
        fp_run(fma(0x4b, 10, 11, 12, 13, RNE), 2.0, 3.0, 1.0).0,
        (-5f32).to_bits()
    );
    assert_eq!(
        fp_run(fma(0x4f, 10, 11, 12, 13, RNE), 2.0, 3.0, 1.0).0,
        (-7f32).to_bits()
    );
    // inf * 0 + qNaN is invalid.
    assert_eq!(
        fp_run(fma(0x43, 10, 11, 12, 13, RNE), f32::INFINITY, 0.0, f32::NAN),
        (0x7fc0_0000, NV)
    );
}

#[test]
fn nan_boxing_is_checked_on_operands_not_on_moves() {
    // An fp register written by fmv.d.x-like raw bits (set through the API) is not boxed.
    let w = [
        fp(0x00, RNE, 10, 11, 11),
        fmv_x_w(A0, 10),
        fmv_x_w(A1, 11),
        fsw(SP, 11, -4),
        load("lwu", A2, SP, -4),
    ];
    let mut text = w.to_vec();
    text.push(RET);
    let program = npusim_device::core::Program::decode(abi::CODE_BASE, &bytes(&text));
    let mut core = npusim_device::core::Core::new(CoreConfig::default());
    let mut bus = npusim_device::core::FlatBus::new(abi::HEAP_BASE, 16);
    core.reset(Default::default());
    core.set_f_bits(11, 0x0000_0000_3f80_0000); // 1.0 without the box
    core.set_x(1, abi::EXIT_PC);
    core.set_pc(abi::CODE_BASE);
    core.execute(&program, &mut bus, 100).unwrap();
    assert_eq!(
        core.f_bits(10),
        0xffff_ffff_7fc0_0000,
        "unboxed operand reads as canonical NaN"
    );
    assert_eq!(core.x(A0 as usize), 0x7fc0_0000);
    assert_eq!(
        core.x(A1 as usize),
        0x3f80_0000,
        "fmv.x.w moves the raw low bits"
    );
    assert_eq!(
        core.x(A2 as usize),
        0x3f80_0000,
        "fsw stores the raw low bits"
    );
    // flw and fmv.w.x box.
    let ran = run(&[store("sw", SP, ZERO, -4), flw(5, SP, -4), fmv_w_x(6, ZERO)]);
    assert_eq!(ran.core.f_bits(5), 0xffff_ffff_0000_0000);
    assert_eq!(ran.core.f_bits(6), 0xffff_ffff_0000_0000);
    // fmv.x.w sign-extends.
    let ran = run_regs(&[(T0, 0xbf80_0000)], &[fmv_w_x(1, T0), fmv_x_w(A0, 1)]);
    assert_eq!(ran.x(A0), 0xffff_ffff_bf80_0000);
}

#[test]
fn sign_injection_min_max_and_compares() {
    let sgnj = |f3| fp(0x10, f3, 10, 11, 12);
    assert_eq!(fp_run(sgnj(0), 2.0, -1.0, 0.0).0, (-2f32).to_bits());
    assert_eq!(fp_run(sgnj(1), 2.0, -1.0, 0.0).0, 2f32.to_bits());
    assert_eq!(fp_run(sgnj(2), -2.0, -1.0, 0.0).0, 2f32.to_bits());
    let min = fp(0x14, 0, 10, 11, 12);
    let max = fp(0x14, 1, 10, 11, 12);
    assert_eq!(fp_run(min, -0.0, 0.0, 0.0), ((-0.0f32).to_bits(), 0));
    assert_eq!(fp_run(max, -0.0, 0.0, 0.0), (0, 0));
    assert_eq!(fp_run(min, f32::NAN, 3.0, 0.0), (3f32.to_bits(), 0));
    let snan = f32::from_bits(0x7f80_0001);
    assert_eq!(fp_run(max, snan, 3.0, 0.0), (3f32.to_bits(), NV));
    assert_eq!(fp_run(max, f32::NAN, f32::NAN, 0.0), (0x7fc0_0000, 0));

    // Compares write an integer register.
    let cmp = |f3, a: f32, b: f32| {
        let mut w = Vec::new();
        for (reg, v) in [(11, a), (12, b)] {
            w.extend(li(T0, v.to_bits() as u64));
            w.push(fmv_w_x(reg, T0));
        }
        w.push(fp(0x50, f3, A0, 11, 12));
        w.push(csrr(A1, 0x001));
        let ran = run(&w);
        (ran.x(A0), ran.x(A1))
    };
    assert_eq!(cmp(2, 1.0, 1.0), (1, 0)); // feq
    assert_eq!(cmp(1, 1.0, 2.0), (1, 0)); // flt
    assert_eq!(cmp(0, 2.0, 2.0), (1, 0)); // fle
    assert_eq!(cmp(2, f32::NAN, 1.0), (0, 0)); // feq is quiet
    assert_eq!(cmp(2, snan, 1.0), (0, NV));
    assert_eq!(cmp(1, f32::NAN, 1.0), (0, NV)); // flt signals
    assert_eq!(cmp(0, -0.0, 0.0), (1, 0));
}

#[test]
fn fclass_reports_every_class() {
    let cases: [(u32, u64); 10] = [
        (f32::NEG_INFINITY.to_bits(), 1 << 0),
        ((-1.0f32).to_bits(), 1 << 1),
        (0x8000_0001, 1 << 2),
        (0x8000_0000, 1 << 3),
        (0, 1 << 4),
        (1, 1 << 5),
        (1f32.to_bits(), 1 << 6),
        (f32::INFINITY.to_bits(), 1 << 7),
        (0x7f80_0001, 1 << 8),
        (0x7fc0_0000, 1 << 9),
    ];
    for (bits, class) in cases {
        let ran = run_regs(
            &[(T0, bits as u64)],
            &[fmv_w_x(1, T0), fp(0x70, 1, A0, 1, 0)],
        );
        assert_eq!(ran.x(A0), class, "{bits:#x}");
    }
}

#[test]
fn conversions_round_saturate_and_extend() {
    // fcvt.{w,wu,l,lu}.s a0, fa1 with rm; returns (a0, fflags).
    let to_int = |rs2, rm, v: f32| {
        let mut w = li(T0, v.to_bits() as u64);
        w.push(fmv_w_x(11, T0));
        w.push(fp(0x60, rm, A0, 11, rs2));
        w.push(csrr(A1, 0x001));
        let ran = run(&w);
        (ran.x(A0), ran.x(A1))
    };
    assert_eq!(to_int(0, RNE, 2.5), (2, NX));
    assert_eq!(to_int(0, RMM, 2.5), (3, NX));
    assert_eq!(to_int(0, RDN, -2.5), ((-3i64) as u64, NX));
    assert_eq!(to_int(0, RUP, -2.5), ((-2i64) as u64, NX));
    assert_eq!(to_int(0, RTZ, -2.5), ((-2i64) as u64, NX));
    assert_eq!(to_int(0, RNE, 3e9), (i32::MAX as u64, NV));
    assert_eq!(
        to_int(0, RNE, f32::NEG_INFINITY),
        (i32::MIN as i64 as u64, NV)
    );
    assert_eq!(to_int(0, RNE, f32::NAN), (i32::MAX as u64, NV));
    assert_eq!(
        to_int(1, RNE, 3e9),
        (3_000_000_000u32 as i32 as i64 as u64, 0)
    );
    assert_eq!(to_int(1, RNE, -1.0), (0, NV));
    assert_eq!(to_int(1, RTZ, -0.5), (0, NX));
    assert_eq!(to_int(2, RNE, -1e19), (i64::MIN as u64, NV));
    assert_eq!(to_int(2, RNE, 1e18), (1e18f32 as i64 as u64, 0));
    assert_eq!(to_int(3, RNE, 1e19), (1e19f32 as u64, 0));
    assert_eq!(to_int(3, RNE, f32::NAN), (u64::MAX, NV));

    // fcvt.s.{w,wu,l,lu} fa0, a1.
    let from_int = |rs2, rm, x: u64| {
        let mut w = li(A1, x);
        w.push(fp(0x68, rm, 10, A1, rs2));
        w.push(fmv_x_w(A0, 10));
        w.push(csrr(A2, 0x001));
        let ran = run(&w);
        (f32::from_bits(ran.x(A0) as u32), ran.x(A2))
    };
    assert_eq!(from_int(0, RNE, (-7i64) as u64), (-7.0, 0));
    assert_eq!(
        from_int(0, RNE, 0xffff_ffff),
        (-1.0, 0),
        "w uses the low 32 bits"
    );
    assert_eq!(from_int(1, RNE, 0xffff_ffff), (4294967296.0, NX));
    assert_eq!(from_int(1, RTZ, 0xffff_ffff), (4294967040.0, NX));
    assert_eq!(from_int(2, RNE, i64::MIN as u64), (-9.223372e18, 0));
    assert_eq!(from_int(3, RUP, (1 << 24) + 1), (16777218.0, NX));
    assert_eq!(from_int(3, RDN, (1 << 24) + 1), (16777216.0, NX));
}

#[test]
fn configured_latencies_are_charged() {
    let mut cfg = CoreConfig::default();
    cfg.latencies.div = 7;
    cfg.latencies.jump = 3;
    let ran = run_with(
        &[addi(A0, ZERO, 9), addi(A1, ZERO, 3), op("div", A2, A0, A1)],
        &[],
        cfg,
    );
    assert_eq!(ran.x(A2), 3);
    assert_eq!(ran.ok().cycles, 1 + 1 + 7 + 3);
}
