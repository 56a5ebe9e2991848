# bench_probe: how long one hardware probe takes, live and on each captured
# tree (target: under 20 ms). Figures go to bench/RESULTS-probe.md.
add_executable(bench_probe ${CMAKE_CURRENT_LIST_DIR}/probe_bench.cc)
target_link_libraries(bench_probe PRIVATE weightpath_probe benchmark::benchmark)
target_compile_definitions(bench_probe PRIVATE
  WEIGHTPATH_HARDWARE_DATA="${PROJECT_SOURCE_DIR}/tests/data/hardware")
weightpath_warnings(bench_probe)
