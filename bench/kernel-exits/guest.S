/* bench/kernel-exits guest: a tiny PVH ELF (ELF64 x86-64 with a XEN_ELFNOTE_PHYS32_ENTRY note,
 * entered in 32-bit protected mode, flat segments: src/arch/x86/pvh.*). It runs LOOPS exits of
 * one cheap in-kernel kind, then writes "K\n" to the serial port (0x3f8, an exit to tern) and
 * powers off through ACPI PM1a_CNT (0x604: SLP_TYP 5 | SLP_EN), so tern exits.
 *   KIND 0: cpuid (leaf 0): SVM "cpuid" exit, handled in KVM
 *   KIND 1: out %al,$0x43 (PIT mode/command, counter-0 latch): SVM "io" exit, KVM's in-kernel PIT
 * Build: as --64 --defsym LOOPS=N --defsym KIND=K guest.S; ld -T guest.ld (bench/kernel-exits/run.sh). */
    .section .text, "ax"
    .code32
    .globl pvh_start
pvh_start:
    mov $LOOPS, %esi
    test %esi, %esi
    jz 2f
1:
.if KIND == 0
    xor %eax, %eax
    cpuid
.else
    xor %eax, %eax
    out %al, $0x43
.endif
    dec %esi
    jnz 1b
2:
    mov $0x3f8, %dx
    mov $'K', %al
    out %al, %dx
    mov $'\n', %al
    out %al, %dx
    mov $0x604, %dx
    mov $0x3400, %ax
    out %ax, %dx
3:
    hlt
    jmp 3b

    .section .note.pvh, "a"
    .balign 4
    .long 4          /* namesz: "Xen\0" */
    .long 4          /* descsz */
    .long 18         /* XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .long pvh_start
