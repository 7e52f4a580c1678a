// The init program's bytes (runner/init_main.cc, built first as its own
// static executable), in the runner library's read-only data. Compiled
// without a compiler cache: the cache would not see the included file.
asm(".section .rodata\n"
    ".balign 64\n"
    ".globl agentenv_init_image\n"
    ".hidden agentenv_init_image\n"
    "agentenv_init_image:\n"
    ".incbin \"" AGENTENV_INIT_PATH "\"\n"
    ".globl agentenv_init_image_end\n"
    ".hidden agentenv_init_image_end\n"
    "agentenv_init_image_end:\n"
    ".previous\n");
