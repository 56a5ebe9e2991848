# Rollout logic costs per resolve and per evaluation pass (Google Benchmark).
add_executable(deploy_bench ${CMAKE_CURRENT_LIST_DIR}/deploy_rollout_bench.cc)
target_link_libraries(deploy_bench PRIVATE weightpath_deploy benchmark::benchmark)
weightpath_warnings(deploy_bench)
