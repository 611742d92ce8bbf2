/* Reset-vector stub of the hostile firmware (tests/kvm/hostile_fw/README in hostile_fw.c):
 * the CPU starts in real mode at CS base 0xFFFF0000, IP 0xFFF0 (Intel SDM Vol. 3A §9.1.4).
 * Everything here lives in the image's last 4 KiB, at 0xFFFFF000 (hostile_fw.ld), so a near jump
 * reaches it with CS unchanged (IP = 0xF000 + offset). It loads a flat GDT, enters 32-bit protected
 * mode without paging and calls hostile_main() with a stack in RAM. */
    .section .reset16, "ax"
    .code16
    .globl start16
start16:
    cli
    cld
    lgdtl %cs:(0xF000 + gdtr - start16)
    movl %cr0, %eax
    orl $1, %eax
    movl %eax, %cr0
    ljmpl $0x08, $start32

    .balign 8
gdt:
    .quad 0
    .quad 0x00CF9B000000FFFF    /* 0x08: code, base 0, 4 GiB, 32-bit */
    .quad 0x00CF93000000FFFF    /* 0x10: data, base 0, 4 GiB */
gdt_end:
gdtr:
    .word gdt_end - gdt - 1
    .long gdt                   /* linear address: the image is mapped flat at 0xFFFFF000 */

    .code32
start32:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
    movw %ax, %fs
    movw %ax, %gs
    movl $0x80000, %esp         /* RAM below 640 KiB */
    call hostile_main
1:  hlt
    jmp 1b

    /* The reset vector: the image's last 16 bytes (tern's firmware check wants a jump here). */
    .code16
    .org 0xFF0
    jmp start16
    .org 0x1000

    .section .note.GNU-stack, "", @progbits
