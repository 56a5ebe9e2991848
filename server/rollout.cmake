# Rollouts on the server side: the in-memory cache resolves read,
# the operator transitions behind FleetAdmin, the reconcile loop, outcome
# intake and metrics. A library of its own so tests drive it against a real
# store without a gRPC server.
add_library(weightpath_server_rollout STATIC
  ${CMAKE_CURRENT_LIST_DIR}/rollout_admin.cc
  ${CMAKE_CURRENT_LIST_DIR}/rollout_cache.cc
  ${CMAKE_CURRENT_LIST_DIR}/rollout_fleet.cc
  ${CMAKE_CURRENT_LIST_DIR}/rollout_metrics.cc
  ${CMAKE_CURRENT_LIST_DIR}/rollout_outcome.cc
  ${CMAKE_CURRENT_LIST_DIR}/rollout_reconciler.cc
  ${CMAKE_CURRENT_LIST_DIR}/rollout_resolve.cc
)
target_include_directories(weightpath_server_rollout PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(weightpath_server_rollout PUBLIC
  weightpath_deploy weightpath_store weightpath_policy weightpath_proto
  prometheus-cpp::core spdlog::spdlog
  absl::status absl::statusor absl::strings absl::synchronization absl::time
  Threads::Threads)
weightpath_warnings(weightpath_server_rollout)
