# Rollout logic costs per resolve and per evaluation pass (Google Benchmark).
add_executable(deploy_bench ${CMAKE_CURRENT_LIST_DIR}/deploy_rollout_bench.cc)
target_link_libraries(deploy_bench PRIVATE weightpath_deploy benchmark::benchmark)
weightpath_warnings(deploy_bench)

# Sequential gates against the threshold gate on simulated stages (a table).
add_executable(deploy_gates_bench ${CMAKE_CURRENT_LIST_DIR}/deploy_gates_bench.cc)
target_link_libraries(deploy_gates_bench PRIVATE weightpath_deploy)
weightpath_warnings(deploy_gates_bench)
