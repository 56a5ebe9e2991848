# Cross-compiling to arm64 (aarch64-linux-gnu) with Debian 12's cross
# compiler (g++-aarch64-linux-gnu) against a sysroot of Debian 12's arm64
# packages, as scripts/build-arm64 makes it:
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#         -DWEIGHTPATH_ARM64_SYSROOT=build-arm64/sysroot -DWEIGHTPATH_AGENT_ONLY=ON ...
# Programs (protoc, grpc_cpp_plugin) are the host's; libraries, headers and
# CMake packages only the sysroot's. Test executables run under qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(WEIGHTPATH_ARM64_SYSROOT "" CACHE PATH "the arm64 sysroot (scripts/build-arm64)")
if(NOT IS_DIRECTORY "${WEIGHTPATH_ARM64_SYSROOT}/usr/include")
  message(FATAL_ERROR "WEIGHTPATH_ARM64_SYSROOT=${WEIGHTPATH_ARM64_SYSROOT} is not an arm64 "
                      "sysroot: scripts/build-arm64 makes one")
endif()
# try_compile() projects read this file again: hand them the sysroot.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES WEIGHTPATH_ARM64_SYSROOT)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_SYSROOT "${WEIGHTPATH_ARM64_SYSROOT}")
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_FIND_ROOT_PATH "${WEIGHTPATH_ARM64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# FindProtobuf looks for protoc as a program: the host's, which generates
# the same code for every architecture.
set(Protobuf_PROTOC_EXECUTABLE /usr/bin/protoc CACHE FILEPATH "the host's protoc")

set(ENV{PKG_CONFIG_LIBDIR}
    "${WEIGHTPATH_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${WEIGHTPATH_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${WEIGHTPATH_ARM64_SYSROOT}")

# CTest and gtest_discover_tests run the arm64 executables through qemu-user,
# with the sysroot as the root of their loader and libraries.
find_program(WEIGHTPATH_QEMU_AARCH64 qemu-aarch64-static REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${WEIGHTPATH_QEMU_AARCH64};-L;${WEIGHTPATH_ARM64_SYSROOT}")
