# CMake toolchain file: Linux riscv64 with the V extension (RVV 1.0), compiled by clang (Debian's
# clang 14+ has the RVV intrinsics; gcc 12 does not). The C library, crt files and libgcc come from
# Debian's riscv64 cross gcc (gcc-riscv64-linux-gnu: /usr/riscv64-linux-gnu and
# /usr/lib/gcc-cross/riscv64-linux-gnu). The target's c_flags add -march=rv64gcv -mabi=lp64d.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)
set(OA_RISCV_SYSROOT /usr/riscv64-linux-gnu CACHE PATH "riscv64 Linux sysroot (from gcc-riscv64-linux-gnu)")
find_program(OA_RVV_CLANG NAMES clang clang-19 clang-16 clang-14 REQUIRED)
set(CMAKE_C_COMPILER ${OA_RVV_CLANG})
set(CMAKE_C_COMPILER_TARGET riscv64-linux-gnu)
# no --sysroot: the cross libc's linker scripts (libc.so) name absolute paths under
# /usr/riscv64-linux-gnu, which a sysroot would prefix again; clang finds Debian's cross layout
# itself, and the cross gcc's crtbegin.o and libgcc under /usr/lib/gcc-cross/riscv64-linux-gnu
set(CMAKE_C_FLAGS_INIT "--gcc-toolchain=/usr")
set(CMAKE_EXE_LINKER_FLAGS_INIT "--gcc-toolchain=/usr")
set(CMAKE_FIND_ROOT_PATH ${OA_RISCV_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
