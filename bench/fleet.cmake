# bench_fleet_resolve: ResolveWeightPath QPS against two running servers,
# registry on and registry off, alternating rounds in one run. Driven by
# bench/fleet_run.sh; never part of ctest.
add_executable(bench_fleet_resolve ${CMAKE_CURRENT_LIST_DIR}/fleet_resolve_load.cc)
target_link_libraries(bench_fleet_resolve PRIVATE
  weightpath_proto gRPC::grpc++ absl::flags absl::flags_parse absl::strings absl::str_format
  absl::time Threads::Threads)
weightpath_warnings(bench_fleet_resolve)
