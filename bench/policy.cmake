# bench_policy_evaluate: nanoseconds per policy decision for each hardware
# class (target: under 1 us), plus the cost of loading and checking a policy.
# Figures go to bench/RESULTS-policy.md.
add_executable(bench_policy_evaluate ${CMAKE_CURRENT_LIST_DIR}/policy_evaluate_bench.cc)
target_link_libraries(bench_policy_evaluate PRIVATE weightpath_policy benchmark::benchmark)
target_compile_definitions(bench_policy_evaluate PRIVATE
  WEIGHTPATH_EXAMPLE_PROFILES_DIR="${PROJECT_SOURCE_DIR}/examples/profiles"
  WEIGHTPATH_GPU_PROFILES_DIR="${PROJECT_SOURCE_DIR}/tests/data/gpu-profiles"
  WEIGHTPATH_GPU_FLEET_POLICY="${PROJECT_SOURCE_DIR}/examples/policies/gpu-fleet.yaml")
weightpath_warnings(bench_policy_evaluate)
