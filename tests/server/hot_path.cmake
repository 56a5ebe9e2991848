# The resolve hot path in-process: the request decoder against protobuf's
# parser, the cached response encoding against Resolve and against
# protobuf's own serializer, and the per-thread
# resolve metrics, and the registry record a resolve leaves.
weightpath_server_suite(server_hot_path_tests
  ${CMAKE_CURRENT_LIST_DIR}/request_decoder_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/response_cache_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/response_wire_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/resolve_stats_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/device_record_test.cc)
target_link_libraries(server_hot_path_tests PRIVATE weightpath_server_lib)

# The profile memo: on its own (hits, misses, colliding hashes, re-measured
# fields, epochs, the memory bound, threads), and the real binary with it
# against the real binary without it (WEIGHTPATH_PROFILE_MEMO=off), byte for
# byte, through reloads and with the registry on.
weightpath_server_suite(server_resolve_memo_tests
  ${CMAKE_CURRENT_LIST_DIR}/profile_memo_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/resolve_memo_server_test.cc)
target_link_libraries(server_resolve_memo_tests PRIVATE weightpath_server_lib)
