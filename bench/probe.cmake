# bench_probe: how long one hardware probe takes, live and on each captured
# tree (target: under 20 ms). Figures go to bench/RESULTS-probe.md.
add_executable(bench_probe ${CMAKE_CURRENT_LIST_DIR}/probe_bench.cc)
target_link_libraries(bench_probe PRIVATE weightpath_probe benchmark::benchmark)
target_compile_definitions(bench_probe PRIVATE
  WEIGHTPATH_HARDWARE_DATA="${PROJECT_SOURCE_DIR}/tests/data/hardware")
weightpath_warnings(bench_probe)
# The GPU probe cold and warm, through the tests' fake NVIDIA libraries (an
# NVML H200, a DGX-style 8xH100, and a CUDA driver whose cuInit takes 250 ms).
if(TARGET fake_cuda_h200_slow)
  target_compile_definitions(bench_probe PRIVATE
    WEIGHTPATH_FAKE_NVIDIA_DIR="$<TARGET_FILE_DIR:fake_cuda_h200_slow>")
  add_dependencies(bench_probe fake_cuda_h200_slow fake_nvml_h200 fake_nvml_dgx_h100)
endif()
