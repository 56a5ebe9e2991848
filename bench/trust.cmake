# bench_trust_verify: TUF metadata verification for a targets file of 1,000
# artifacts (and 10 and 10,000), a full and a cached refresh, a lookup.
# Figures go to bench/RESULTS-trust.md.
add_executable(bench_trust_verify ${CMAKE_CURRENT_LIST_DIR}/trust_verify_bench.cc)
target_link_libraries(bench_trust_verify PRIVATE
  weightpath_trust benchmark::benchmark absl::strings absl::time)
weightpath_warnings(bench_trust_verify)
