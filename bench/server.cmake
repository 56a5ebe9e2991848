# weightpath-server under load (bench/server_load.sh drives h2load): resolve
# vs health QPS, p50/p99 at 1/16/64 in flight, server RSS. Figures go to
# bench/RESULTS-server.md. Run: cmake --build <dir> --target bench_server_load
add_executable(bench_server_request_body ${CMAKE_CURRENT_LIST_DIR}/server_request_body.cc)
target_link_libraries(bench_server_request_body PRIVATE weightpath_server_lib)
weightpath_warnings(bench_server_request_body)

add_custom_target(bench_server_load
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/server_load.sh $<TARGET_FILE:weightpath-server>
          $<TARGET_FILE:bench_server_request_body> $<TARGET_FILE:bench_grpc_floor_server>
  DEPENDS weightpath-server bench_server_request_body bench_grpc_floor_server
  USES_TERMINAL
  VERBATIM)

# The gRPC floor for the same messages (see the file's header).
add_executable(bench_grpc_floor_server ${CMAKE_CURRENT_LIST_DIR}/grpc_floor_server.cc)
target_link_libraries(bench_grpc_floor_server PRIVATE weightpath_server_lib)
weightpath_warnings(bench_grpc_floor_server)

# bench_server_hot_path: the per-call work outside gRPC, hot path vs the
# straightforward protobuf way.
add_executable(bench_server_hot_path ${CMAKE_CURRENT_LIST_DIR}/server_hot_path_bench.cc)
target_link_libraries(bench_server_hot_path PRIVATE weightpath_server_lib benchmark::benchmark)
target_compile_definitions(bench_server_hot_path PRIVATE
  WEIGHTPATH_EXAMPLE_PROFILES_DIR="${PROJECT_SOURCE_DIR}/examples/profiles"
  WEIGHTPATH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
weightpath_warnings(bench_server_hot_path)

# bench_published: a published snapshot's read, thread-local copy vs a
# shared_ptr copy per call.
add_executable(bench_published ${CMAKE_CURRENT_LIST_DIR}/published_bench.cc)
target_include_directories(bench_published PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(bench_published PRIVATE benchmark::benchmark absl::synchronization)
weightpath_warnings(bench_published)
