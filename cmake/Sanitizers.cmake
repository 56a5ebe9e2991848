# Sanitizer and fuzzing builds. Each goes into a build directory of its own
# (scripts/test, scripts/fuzz); the default build is not affected.
#
#   -DWEIGHTPATH_SANITIZE=address,undefined   ASan + UBSan, every target
#   -DWEIGHTPATH_SANITIZE=thread              TSan, every target (the tests
#                                             get tests/sanitizers' abseil shim)
#   -DWEIGHTPATH_FUZZ=ON                      libFuzzer targets of tests/fuzz;
#                                             implies address,undefined
#
# Both need clang (Debian's clang 14 with libfuzzer-14-dev). Dependencies
# come from Debian and are not instrumented: ASan and UBSan check our code
# and what it passes across, TSan needs tests/sanitizers/tsan_absl_sync.cc
# to see abseil's locks.
set(WEIGHTPATH_SANITIZE "" CACHE STRING
  "Sanitizers to build every target with: address,undefined or thread (clang)")
option(WEIGHTPATH_FUZZ "Build the libFuzzer targets of tests/fuzz (clang)" OFF)

if(WEIGHTPATH_FUZZ AND WEIGHTPATH_SANITIZE STREQUAL "")
  set(WEIGHTPATH_SANITIZE "address,undefined" CACHE STRING "" FORCE)
endif()
if(WEIGHTPATH_FUZZ AND WEIGHTPATH_SANITIZE MATCHES "thread")
  message(FATAL_ERROR "WEIGHTPATH_FUZZ runs under ASan and UBSan, not TSan")
endif()

if(NOT WEIGHTPATH_SANITIZE STREQUAL "")
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "WEIGHTPATH_SANITIZE/WEIGHTPATH_FUZZ need clang: "
                        "-DCMAKE_CXX_COMPILER=clang++ (scripts/test does this)")
  endif()
  # Frame pointers keep the reports' stacks whole at -O1.
  add_compile_options(-fsanitize=${WEIGHTPATH_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${WEIGHTPATH_SANITIZE})
  if(WEIGHTPATH_SANITIZE MATCHES "undefined")
    # A UBSan finding fails the process instead of printing and going on,
    # so CTest and the fuzzers see it.
    add_compile_options(-fno-sanitize-recover=all)
  endif()
  if(WEIGHTPATH_SANITIZE MATCHES "address")
    # Index checks in the standard containers: ASan cannot see an index past
    # size() but within capacity(). No ABI change.
    add_compile_definitions(_GLIBCXX_ASSERTIONS)
  endif()
endif()

if(WEIGHTPATH_FUZZ)
  # Coverage for libFuzzer everywhere; only the fuzz targets link its main.
  # The test suites in the same tree still link and run (the coverage
  # callbacks come from the sanitizer runtime), so one tree serves both.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
