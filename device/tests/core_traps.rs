//! Every way a block can stop: each trap kind with its pc and address, the ecall services, the
//! watchdog, test mode, and a fuzz run showing that no input makes the core panic.

mod core_asm;

use core_asm::*;
use npusim_device::abi;
use npusim_device::core::{
    Core, CoreConfig, Exit, FlatBus, KernelArg, MemFault, NpuCsrs, Program, TestMode, Trap,
};

fn pc_of(i: u64) -> u64 {
    abi::CODE_BASE + 4 * i
}

#[test]
fn illegal_instruction_reports_its_bits() {
    let ran = run(&[addi(A0, ZERO, 1), 0]);
    assert_eq!(
        ran.trap(),
        Trap::IllegalInstruction {
            pc: pc_of(1),
            bits: 0
        }
    );
    // Illegal words that are never executed are harmless.
    assert!(run(&[jal(ZERO, 8), 0xffff_ffff]).result.is_ok());
    // mret is privileged outside test mode.
    assert_eq!(
        run(&[0x3020_0073]).trap(),
        Trap::IllegalInstruction {
            pc: pc_of(0),
            bits: 0x3020_0073
        }
    );
}

#[test]
fn jumping_outside_the_program_is_an_instruction_page_fault() {
    let mut w = li(T0, abi::HEAP_BASE);
    w.push(jalr(ZERO, T0, 0));
    assert_eq!(
        run(&w).trap(),
        Trap::InstructionPageFault { pc: abi::HEAP_BASE }
    );
    // Running off the end of the text.
    let program = Program::decode(abi::CODE_BASE, &bytes(&[addi(A0, ZERO, 1)]));
    let mut core = Core::new(CoreConfig::default());
    let mut bus = FlatBus::new(abi::HEAP_BASE, 16);
    let t = core
        .run(
            &program,
            abi::CODE_BASE,
            &[],
            NpuCsrs::default(),
            &mut bus,
            100,
        )
        .unwrap_err();
    assert_eq!(
        t,
        Trap::InstructionPageFault {
            pc: abi::CODE_BASE + 4
        }
    );
    assert_eq!(t.addr(), Some(abi::CODE_BASE + 4));
}

#[test]
fn a_misaligned_jump_target_traps() {
    let mut w = vec![0x0000_0297]; // auipc t0, 0
    w.push(jalr(ZERO, T0, 6)); // base + 6 (bit 0 cleared, bit 1 set)
    assert_eq!(
        run(&w).trap(),
        Trap::InstructionMisaligned {
            pc: abi::CODE_BASE + 6
        }
    );
}

#[test]
fn unmapped_loads_and_stores_are_page_faults_with_the_address() {
    let t = run(&[load("ld", A0, ZERO, 8)]).trap();
    assert_eq!(
        t,
        Trap::LoadPageFault {
            pc: pc_of(0),
            addr: 8,
            fault: MemFault::unmapped(8)
        }
    );
    assert_eq!(t.addr(), Some(8));
    let mut w = li(T0, abi::HEAP_BASE + BUS_SIZE as u64);
    let n = w.len() as u64;
    w.push(store("sw", T0, ZERO, 0));
    let addr = abi::HEAP_BASE + BUS_SIZE as u64;
    assert_eq!(
        run(&w).trap(),
        Trap::StorePageFault {
            pc: pc_of(n),
            addr,
            fault: MemFault::unmapped(addr)
        }
    );
    // Just below the local window is not local.
    let mut w = li(T0, abi::LOCAL_BASE - 8);
    w.push(load("ld", A0, T0, 0));
    assert!(
        matches!(run(&w).trap(), Trap::LoadPageFault { addr, .. } if addr == abi::LOCAL_BASE - 8)
    );
}

#[test]
fn misaligned_accesses_trap_everywhere() {
    let top = abi::LOCAL_BASE + abi::LOCAL_STACK_SIZE;
    for (word, offset, load_kind) in [
        (load("lh", A0, SP, -1), 1, true),
        (load("lw", A0, SP, -2), 2, true),
        (load("ld", A0, SP, -4), 4, true),
        (flw(1, SP, -2), 2, true),
        (store("sh", SP, ZERO, -3), 3, false),
        (store("sd", SP, ZERO, -12), 12, false),
        (fsw(SP, 1, -1), 1, false),
    ] {
        let (pc, addr) = (pc_of(0), top - offset);
        let want = if load_kind {
            Trap::LoadMisaligned { pc, addr }
        } else {
            Trap::StoreMisaligned { pc, addr }
        };
        assert_eq!(run(&[word]).trap(), want);
    }
    // On the bus too.
    let mut w = li(T0, abi::HEAP_BASE + 2);
    w.push(load("lw", A0, T0, 0));
    assert!(matches!(run(&w).trap(), Trap::LoadMisaligned { .. }));
    // Byte accesses are always aligned.
    assert!(
        run(&[load("lb", A0, SP, -1), store("sb", SP, A0, -3)])
            .result
            .is_ok()
    );
}

#[test]
fn integer_division_by_zero_traps_on_the_npu() {
    for name in [
        "div", "divu", "rem", "remu", "divw", "divuw", "remw", "remuw",
    ] {
        let ran = run_regs(&[(A0, 7), (A1, 0)], &[op(name, A2, A0, A1)]);
        assert!(matches!(ran.trap(), Trap::DivideByZero { .. }), "{name}");
    }
    // The word forms look only at the low 32 bits of the divisor.
    let ran = run_regs(&[(A0, 7), (A1, 1 << 32)], &[op("divw", A2, A0, A1)]);
    assert!(matches!(ran.trap(), Trap::DivideByZero { .. }));
}

#[test]
fn ebreak_is_a_breakpoint() {
    assert_eq!(
        run(&[addi(A0, ZERO, 1), EBREAK]).trap(),
        Trap::Breakpoint { pc: pc_of(1) }
    );
}

#[test]
fn ecall_services_print_and_abort() {
    // print_str from the stack: "hi!" stored at sp-8.
    let mut w = li(T0, u32::from_le_bytes(*b"hi!\0") as u64);
    w.extend([
        store("sw", SP, T0, -8),
        addi(A0, SP, -8),
        addi(A1, ZERO, 3),
        addi(A7, ZERO, 1),
        ECALL,
    ]);
    // print_i64(-42)
    w.extend([addi(A0, ZERO, -42), addi(A7, ZERO, 2), ECALL]);
    // print_f32(fa0 = 1.5)
    w.extend(li(T0, 1.5f32.to_bits() as u64));
    w.extend([fmv_w_x(10, T0), addi(A7, ZERO, 3), ECALL]);
    let mut ran = run(&w);
    ran.ok();
    assert_eq!(
        ran.core.take_output(),
        vec!["hi!".to_string(), "-42".into(), "1.5".into()]
    );
    assert!(ran.core.output().is_empty());

    // A string on the bus, longer than the 4 KiB cap.
    let mut w = li(A0, abi::HEAP_BASE);
    w.extend(li(A1, 10_000));
    w.extend([addi(A7, ZERO, 1), ECALL]);
    let mut text = w.clone();
    text.push(RET);
    let program = Program::decode(abi::CODE_BASE, &bytes(&text));
    let mut bus = FlatBus::new(abi::HEAP_BASE, 16 * 1024);
    bus.mem.fill(b'x');
    let mut core = Core::new(CoreConfig::default());
    let stats = core
        .run(
            &program,
            abi::CODE_BASE,
            &[],
            NpuCsrs::default(),
            &mut bus,
            1000,
        )
        .unwrap();
    assert_eq!(core.output()[0].len(), 4096);
    assert_eq!(stats.bus_loads, 1);

    // An empty string is not read at all, wherever it points.
    let ran = run(&[addi(A0, ZERO, 16), addi(A7, ZERO, 1), ECALL]);
    ran.ok();
    assert_eq!(ran.core.output(), [""]);

    // A string at a wild pointer is a load fault.
    let t = run(&[
        addi(A0, ZERO, 16),
        addi(A1, ZERO, 4),
        addi(A7, ZERO, 1),
        ECALL,
    ])
    .trap();
    assert!(matches!(t, Trap::LoadPageFault { addr: 16, pc, .. } if pc == pc_of(3)));

    // Abort with a code; output before it survives.
    let ran = run(&[
        addi(A0, ZERO, 5),
        addi(A7, ZERO, 2),
        ECALL,
        addi(A0, ZERO, -7),
        addi(A7, ZERO, 93),
        ECALL,
    ]);
    assert_eq!(
        ran.trap(),
        Trap::Abort {
            pc: pc_of(5),
            code: -7
        }
    );
    assert_eq!(ran.core.output(), ["5"]);

    // Unknown services.
    assert_eq!(
        run(&[addi(A7, ZERO, 77), ECALL]).trap(),
        Trap::UnknownEcall {
            pc: pc_of(1),
            service: 77
        }
    );
}

#[test]
fn the_watchdog_stops_a_runaway_block() {
    let program = Program::decode(abi::CODE_BASE, &bytes(&[addi(A0, A0, 1), jal(ZERO, -4)]));
    let mut core = Core::new(CoreConfig::default());
    let mut bus = FlatBus::new(abi::HEAP_BASE, 16);
    let t = core
        .run(
            &program,
            abi::CODE_BASE,
            &[],
            NpuCsrs::default(),
            &mut bus,
            1001,
        )
        .unwrap_err();
    assert_eq!(
        t,
        Trap::BudgetExceeded {
            pc: abi::CODE_BASE + 4,
            budget: 1001
        }
    );
    assert_eq!(core.stats().instructions, 1001);
    assert_eq!(core.x(A0 as usize), 501);
    // A run that returns on its last allowed instruction is fine.
    let ok = run_with(&[addi(A0, ZERO, 1)], &[], CoreConfig::default());
    assert_eq!(ok.ok().instructions, 2);
}

#[test]
fn runs_start_clean_and_stats_survive_a_trap() {
    let program = Program::decode(
        abi::CODE_BASE,
        &bytes(&[load("ld", A0, SP, -8), store("sd", SP, SP, -8), EBREAK]),
    );
    let mut core = Core::new(CoreConfig::default());
    let mut bus = FlatBus::new(abi::HEAP_BASE, 16);
    for _ in 0..2 {
        let t = core
            .run(
                &program,
                abi::CODE_BASE,
                &[],
                NpuCsrs::default(),
                &mut bus,
                100,
            )
            .unwrap_err();
        assert_eq!(
            t,
            Trap::Breakpoint {
                pc: abi::CODE_BASE + 8
            }
        );
        // The stack slot written by the previous run was cleared.
        assert_eq!(core.x(A0 as usize), 0);
        assert_eq!(core.stats().instructions, 3);
    }
}

#[test]
fn stack_arguments_that_do_not_fit_fault_before_running() {
    let args = vec![KernelArg::Int(1); 8 + 100];
    let cfg = CoreConfig {
        local_size: 256,
        ..CoreConfig::default()
    };
    let t = run_with(&[], &args, cfg).trap();
    assert!(matches!(t, Trap::StorePageFault { .. }), "{t}");
}

/// A test-mode run of `words` with `tohost` in the bus.
fn run_test_mode(words: &[u32]) -> (Core, Result<Exit, Trap>) {
    let program = Program::decode(abi::CODE_BASE, &bytes(words));
    let mut bus = FlatBus::new(abi::HEAP_BASE, 64);
    let mut core = Core::new(CoreConfig {
        test_mode: Some(TestMode {
            tohost: abi::HEAP_BASE + 8,
        }),
        ..CoreConfig::default()
    });
    core.reset(NpuCsrs::default());
    core.set_pc(abi::CODE_BASE);
    let r = core.execute(&program, &mut bus, 1000);
    (core, r)
}

#[test]
fn test_mode_traps_ecall_to_mtvec_and_exits_through_tohost() {
    let mut w = vec![0x0000_0297]; // 0: auipc t0, 0
    w.push(addi(T0, T0, 28)); //      4: t0 = handler (base + 28)
    w.push(csrw(0x305, T0)); //       8: mtvec
    w.push(csrr(A0, 0xf14)); //      12: mhartid = 0
    w.push(addi(A1, ZERO, 7)); //    16
    w.push(op("div", A2, A1, ZERO)); // 20: RISC-V result, no trap
    w.push(ECALL); //                24
    // handler at 28: tohost = mcause * 2 + (mepc == base + 24)
    w.extend([csrr(T1, 0x342), csrr(T2, 0x341)]);
    w.extend(li(A3, abi::HEAP_BASE + 8));
    w.push(op("add", T1, T1, T1));
    w.push(store("sd", A3, T1, 0));
    let (core, r) = run_test_mode(&w);
    assert_eq!(r, Ok(Exit::ToHost(22)));
    assert_eq!(
        core.x(A2 as usize),
        u64::MAX,
        "division by zero gives all ones in test mode"
    );
    assert_eq!(core.x(T2 as usize), abi::CODE_BASE + 24);
    assert_eq!(core.x(A0 as usize), 0);
}

#[test]
fn test_mode_mret_jumps_to_mepc() {
    let mut w = vec![
        0x0000_0297,
        addi(T0, T0, 20),
        csrw(0x341, T0),
        0x3020_0073,
        EBREAK,
    ];
    w.extend(li(A3, abi::HEAP_BASE + 8));
    w.extend([addi(T1, ZERO, 1), store("sw", A3, T1, 0)]);
    assert_eq!(run_test_mode(&w).1, Ok(Exit::ToHost(1)));
}

/// xorshift64*, deterministic.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A random word that is usually a valid instruction: a real major opcode with its function
/// fields drawn from the defined ones, registers and immediates random. Short branch and jump
/// offsets keep control inside the program more often.
fn plausible_word(rng: &mut Rng) -> u32 {
    let w = rng.next() as u32;
    let pick = |rng: &mut Rng, xs: &[u32]| xs[(rng.next() % xs.len() as u64) as usize];
    match rng.next() % 16 {
        0 => w,
        1 => {
            (w & !0x7f)
                | pick(
                    rng,
                    &[
                        0x03, 0x07, 0x0f, 0x17, 0x1b, 0x23, 0x27, 0x37, 0x43, 0x47, 0x4b, 0x4f,
                    ],
                )
        }
        2 | 3 => (w & 0x01ff_ffff & !0x7f) | pick(rng, &[0, 0x20, 1]) << 25 | 0x33,
        4 => (w & 0x01ff_ffff & !0x7f) | pick(rng, &[0, 0x20, 1]) << 25 | 0x3b,
        5 | 6 => (w & !0x7f) | 0x13,
        7 => {
            let f7 = pick(
                rng,
                &[
                    0x00, 0x04, 0x08, 0x0c, 0x2c, 0x10, 0x14, 0x60, 0x68, 0x70, 0x50, 0x78,
                ],
            );
            let rs2 = if f7 >= 0x60 || f7 == 0x2c {
                (w >> 20) & 3
            } else {
                (w >> 20) & 31
            };
            (f7 << 25) | (rs2 << 20) | (w & 0x000f_ff80) | 0x53
        }
        8 | 9 => (w & 0x01ff_f07f & !0x7f) | ((w >> 31) << 31) | 0x63, // branch, offset < 64
        10 => (w & 0x000f_ff80 & !0xf_f000) | ((w & 0x3f) << 21) | 0x6f, // short jal
        11 => {
            let csr = pick(
                rng,
                &[
                    0x001, 0x002, 0x003, 0xc00, 0xc01, 0xc02, 0xcc0, 0xcc3, 0x300, 0x305, 0x341,
                    0x342, 0xf14, 0x7c0,
                ],
            );
            (csr << 20) | (w & 0x000f_ff80) | 0x73
        }
        12 => pick(rng, &[0x0000_0073, 0x0010_0073, 0x3020_0073, 0x0000_8067]),
        _ => (w & !0x7f) | pick(rng, &[0x03, 0x23, 0x13, 0x33]),
    }
}

#[test]
fn random_programs_never_panic() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut executed = 0;
    let mut outcomes = std::collections::BTreeMap::new();
    for round in 0..2000 {
        let len = 1 + (rng.next() % 200) as usize;
        let words: Vec<u32> = (0..len).map(|_| plausible_word(&mut rng)).collect();
        // Some raw bytes too, of odd lengths.
        let mut text = bytes(&words);
        text.truncate(text.len() - (round % 4));
        let program = Program::decode(abi::CODE_BASE, &text);
        let test_mode = round % 3 == 0;
        let mut core = Core::new(CoreConfig {
            test_mode: test_mode.then_some(TestMode {
                tohost: abi::HEAP_BASE,
            }),
            local_size: 4096,
            ..CoreConfig::default()
        });
        let mut bus = FlatBus::new(abi::HEAP_BASE, 4096);
        core.reset(NpuCsrs {
            block_idx: 1,
            block_dim: 2,
            core_id: 0,
            tiling: 0,
            ..NpuCsrs::default()
        });
        // Registers pointing at the bus, the stack, the code and nowhere.
        for r in 1..32 {
            let v = match rng.next() % 5 {
                0 => abi::HEAP_BASE + rng.next() % 5000,
                1 => abi::LOCAL_BASE + rng.next() % 5000,
                2 => abi::CODE_BASE + rng.next() % 1000,
                _ => rng.next(),
            };
            core.set_x(r, v);
            core.set_f_bits(r, rng.next());
        }
        core.set_fcsr(rng.next() as u32);
        core.set_pc(abi::CODE_BASE + 4 * (rng.next() % len as u64));
        // Whatever happens, it is a value, not a panic.
        let r = core.execute(&program, &mut bus, 5_000);
        let kind = match r {
            Ok(_) => "exit".to_string(),
            Err(t) => format!("{t:?}")
                .split([' ', '{'])
                .next()
                .unwrap_or("")
                .to_string(),
        };
        *outcomes.entry(kind).or_insert(0) += 1;
        assert!(core.stats().instructions <= 5_000);
        executed += core.stats().instructions;
    }
    eprintln!("{executed} instructions, outcomes {outcomes:?}");
    // Most trap kinds are reached, so the fuzzing reaches deep into the interpreter.
    assert!(outcomes.len() >= 8, "{outcomes:?}");
}
