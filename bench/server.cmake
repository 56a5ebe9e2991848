# weightpath-server under load (bench/server_load.sh drives h2load): resolve
# vs health QPS, p50/p99 at 1/16/64 in flight, server RSS. Figures go to
# bench/RESULTS-server.md. Run: cmake --build <dir> --target bench_server_load
add_executable(bench_server_request_body ${CMAKE_CURRENT_LIST_DIR}/server_request_body.cc)
target_link_libraries(bench_server_request_body PRIVATE weightpath_policy weightpath_proto)
weightpath_warnings(bench_server_request_body)

add_custom_target(bench_server_load
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/server_load.sh $<TARGET_FILE:weightpath-server>
          $<TARGET_FILE:bench_server_request_body>
  DEPENDS weightpath-server bench_server_request_body
  USES_TERMINAL
  VERBATIM)
