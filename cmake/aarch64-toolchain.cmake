# Cross-compiling attograd for aarch64 (64-bit Arm: Graviton, Ampere, Apple silicon under Linux) on an
# x86-64 Debian, with Debian's cross compiler (g++-aarch64-linux-gnu), and running the programs it builds
# under qemu-user. scripts/test --arch aarch64 uses it (docs/testing.md "Arm"):
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-toolchain.cmake -DATTOGRAD_PYTHON=OFF
# The compiler's baseline (armv8-a) has Advanced SIMD (NEON) and its fused multiply-adds: CMakeLists.txt
# leaves -march=native out of a cross build, and the GEMM's vector kernel compiles to NEON.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
# Headers and CMake packages come from the host as well: Eigen, nlohmann/json and CLI11 are header-only,
# and the host's Boost and PCRE2 headers are those of the arm64 libraries below (the same versions).
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# The two compiled libraries attograd links, Boost.Test and PCRE2, are Debian's arm64 runtime packages
# (libboost-test1.74.0:arm64, libpcre2-8-0:arm64, by multiarch) in this folder, and
# cmake/cross_runtime_libraries.cmake makes their targets: their -dev packages would pull in arm64
# libc6-dev and, with it, upgrades of host packages.
set(ATTOGRAD_RUNTIME_LIBDIR /usr/lib/aarch64-linux-gnu)
# ctest runs each test program under qemu-user. The programs load the arm64 libc, libstdc++ and the two
# libraries above from multiarch's /lib/ld-linux-aarch64.so.1 and /usr/lib/aarch64-linux-gnu, so no -L.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
