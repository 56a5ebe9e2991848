# bench_store: registry size, RSS, bulk upsert and durable measurement rates.
# Run by hand (bench/store_run.sh); never part of ctest.
add_executable(bench_store ${CMAKE_CURRENT_LIST_DIR}/store_bench.cc)
target_link_libraries(bench_store PRIVATE weightpath_store absl::flags absl::flags_parse absl::strings absl::time)
weightpath_warnings(bench_store)
