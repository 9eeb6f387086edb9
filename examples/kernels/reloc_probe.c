/*
 * reloc_probe.c — a loader self-test: one kernel written in assembly so that the object needs
 * every relocation type the loader claims to handle, including those C code rarely makes
 * (R_RISCV_JAL, R_RISCV_BRANCH and R_RISCV_CALL across sections, the ADD/SUB/SET data fixups).
 * The engine's loader tests link this object and compare the bytes with ld.lld's output; a
 * runtime test can also run it and compare what it writes with the loader's symbol addresses.
 *
 * It lives in a .c file (top-level asm) so that one compiler command builds every kernel.
 */
#include "npusim.h"

/*
 * reloc_probe(out): fills out[0..8) with values that only come out right when the loader
 * patched each relocation correctly:
 *   out[0] = 0x11                      returned by a helper reached with `jal` (R_RISCV_JAL)
 *   out[1] = 0x22                      returned by a helper reached with `call` (R_RISCV_CALL_PLT)
 *   out[2] = 0x33                      set on a path reached by a cross-section branch
 *                                      (R_RISCV_BRANCH), which jumps back (R_RISCV_JAL, rd = x0)
 *   out[3] = 0x12345678                probe_word, loaded with lui/lw (R_RISCV_HI20, LO12_I)
 *   out[4] = &reloc_probe              from probe_table[0] (R_RISCV_64), read with
 *                                      auipc/ld (R_RISCV_PCREL_HI20, PCREL_LO12_I)
 *   out[5] = &probe_call_target - &reloc_probe
 *                                      from probe_table (R_RISCV_ADD64 / SUB64)
 *   out[6] = 0x44                      returned by a helper reached with an explicit
 *                                      R_RISCV_CALL (non-PLT) auipc/jalr pair
 *   out[7] = 0x5678                    probe_scratch after storing through both
 *                                      R_RISCV_LO12_S and R_RISCV_PCREL_LO12_S
 *   a0 out: uint64_t*  eight words
 * The remaining words of probe_table hold R_RISCV_32, ADD/SUB 8/16/32, SET6/SUB6,
 * SET8/16/32 and R_RISCV_32_PCREL results; the loader tests check them byte for byte.
 */
__asm__(
    "  .section .text.reloc_probe,\"ax\",@progbits\n"
    "  .p2align 2\n"
    "  .globl reloc_probe\n"
    "  .type reloc_probe,@function\n"
    "reloc_probe:\n"
    "  addi sp, sp, -16\n"
    "  sd ra, 8(sp)\n"
    "  sd s0, 0(sp)\n"
    "  mv s0, a0\n"
    "  jal ra, probe_jal_target\n"
    "  sd a0, 0(s0)\n"
    "  call probe_call_target\n"
    "  sd a0, 8(s0)\n"
    "  li t0, 1\n"
    "  bnez t0, probe_branch_target\n"
    "  .globl probe_branch_back\n"
    "probe_branch_back:\n"
    "  sd a0, 16(s0)\n"
    "  lui t1, %hi(probe_word)\n"
    "  lw t2, %lo(probe_word)(t1)\n"
    "  sd t2, 24(s0)\n"
    ".Lprobe_pc0:\n"
    "  auipc t3, %pcrel_hi(probe_table)\n"
    "  ld t4, %pcrel_lo(.Lprobe_pc0)(t3)\n"
    "  sd t4, 32(s0)\n"
    ".Lprobe_pc1:\n"
    "  auipc t3, %pcrel_hi(probe_table + 16)\n"
    "  ld t4, %pcrel_lo(.Lprobe_pc1)(t3)\n"
    "  sd t4, 40(s0)\n"
    "  .reloc ., R_RISCV_CALL, probe_plain_call_target\n"
    "  auipc ra, 0\n"
    "  jalr ra, 0(ra)\n"
    "  sd a0, 48(s0)\n"
    "  li t2, 0x34\n"
    "  lui t1, %hi(probe_scratch)\n"
    "  sw t2, %lo(probe_scratch)(t1)\n"
    "  li t2, 0x5678\n"
    ".Lprobe_pc2:\n"
    "  auipc t3, %pcrel_hi(probe_scratch)\n"
    "  sw t2, %pcrel_lo(.Lprobe_pc2)(t3)\n"
    "  lw t2, %lo(probe_scratch)(t1)\n"
    "  sd t2, 56(s0)\n"
    "  ld ra, 8(sp)\n"
    "  ld s0, 0(sp)\n"
    "  addi sp, sp, 16\n"
    "  ret\n"
    "  .size reloc_probe, .-reloc_probe\n"
    "\n"
    "  .section .text.probe_helpers,\"ax\",@progbits\n"
    "  .p2align 2\n"
    "  .type probe_jal_target,@function\n"
    "probe_jal_target:\n"
    "  li a0, 0x11\n"
    "  ret\n"
    "  .size probe_jal_target, .-probe_jal_target\n"
    "  .globl probe_call_target\n"
    "  .type probe_call_target,@function\n"
    "probe_call_target:\n"
    "  li a0, 0x22\n"
    "  ret\n"
    "  .size probe_call_target, .-probe_call_target\n"
    "  .type probe_plain_call_target,@function\n"
    "probe_plain_call_target:\n"
    "  li a0, 0x44\n"
    "  ret\n"
    "  .size probe_plain_call_target, .-probe_plain_call_target\n"
    "  .type probe_branch_target,@function\n"
    "probe_branch_target:\n"
    "  li a0, 0x33\n"
    "  j probe_branch_back\n"
    "  .size probe_branch_target, .-probe_branch_target\n"
    "\n"
    "  .section .data.reloc_probe,\"aw\",@progbits\n"
    "  .p2align 3\n"
    "  .globl probe_table\n"
    "  .type probe_table,@object\n"
    "probe_table:\n"
    "  .quad reloc_probe\n"                           /* +0   R_RISCV_64 */
    "  .word probe_word\n"                            /* +8   R_RISCV_32 */
    "  .word probe_call_target - reloc_probe\n"       /* +12  ADD32 / SUB32 */
    "  .quad probe_call_target - reloc_probe\n"       /* +16  ADD64 / SUB64 */
    "  .half probe_call_target - reloc_probe\n"       /* +24  ADD16 / SUB16 */
    "  .byte probe_call_target - reloc_probe\n"       /* +26  ADD8 / SUB8 */
    "  .reloc ., R_RISCV_SET6, probe_call_target\n"
    "  .byte 0xc0\n"                                  /* +27  SET6 keeps the top two bits */
    "  .reloc ., R_RISCV_SUB6, reloc_probe\n"
    "  .byte 0xff\n"                                  /* +28  SUB6 */
    "  .reloc ., R_RISCV_SET8, probe_jal_target\n"
    "  .byte 0\n"                                     /* +29  SET8 */
    "  .reloc ., R_RISCV_SET16, probe_jal_target\n"
    "  .half 0\n"                                     /* +30  SET16 */
    "  .reloc ., R_RISCV_SET32, probe_jal_target\n"
    "  .word 0\n"                                     /* +32  SET32 */
    "  .reloc ., R_RISCV_32_PCREL, reloc_probe\n"
    "  .word 0\n"                                     /* +36  32_PCREL */
    "  .size probe_table, .-probe_table\n"
    "\n"
    "  .section .sdata.probe_word,\"aw\",@progbits\n"
    "  .p2align 2\n"
    "  .type probe_word,@object\n"
    "probe_word:\n"
    "  .word 0x12345678\n"
    "  .size probe_word, 4\n"
    "\n"
    "  .section .bss.probe_scratch,\"aw\",@nobits\n"
    "  .p2align 2\n"
    "  .type probe_scratch,@object\n"
    "probe_scratch:\n"
    "  .zero 4\n"
    "  .size probe_scratch, 4\n"
    "  .text\n");
