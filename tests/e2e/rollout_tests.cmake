# Rollout suites (CTest names start with "Rollout"): the agent's run loop and
# weightpathctl rollout's client side as units, and the server's rollout
# library against a real store (SQLite, and a real PostgreSQL 15 shared by
# two "replicas").
add_executable(rollout_agent_tests ${CMAKE_CURRENT_LIST_DIR}/rollout_agent_run_loop_test.cc)
target_link_libraries(rollout_agent_tests PRIVATE weightpath_agent_lib weightpath_testing)
weightpath_warnings(rollout_agent_tests)
gtest_discover_tests(rollout_agent_tests TEST_PREFIX Rollout. DISCOVERY_TIMEOUT 60
                     PROPERTIES TIMEOUT 120)

add_executable(rollout_ctl_tests ${CMAKE_CURRENT_LIST_DIR}/rollout_ctl_test.cc)
target_compile_definitions(rollout_ctl_tests PRIVATE
  WEIGHTPATH_ROLLOUT_EXAMPLE="${PROJECT_SOURCE_DIR}/examples/rollout-agentic-fidelity.yaml")
target_link_libraries(rollout_ctl_tests PRIVATE weightpath_ctl_lib weightpath_deploy weightpath_testing)
weightpath_warnings(rollout_ctl_tests)
gtest_discover_tests(rollout_ctl_tests TEST_PREFIX Rollout. DISCOVERY_TIMEOUT 60
                     PROPERTIES TIMEOUT 120)

add_executable(rollout_server_tests
  ${PROJECT_SOURCE_DIR}/tests/server/rollout_server_test.cc
)
target_compile_definitions(rollout_server_tests PRIVATE
  WEIGHTPATH_EXAMPLE_PROFILES_DIR="${PROJECT_SOURCE_DIR}/examples/profiles")
target_link_libraries(rollout_server_tests PRIVATE
  weightpath_server_rollout weightpath_server_resolve weightpath_store_testing weightpath_testing prometheus-cpp::core)
weightpath_warnings(rollout_server_tests)
# One CTest test for the binary: one PostgreSQL (the run's shared one, or its own
# under a plain ctest) for all its cases.
add_test(NAME RolloutServer COMMAND rollout_server_tests)
set_tests_properties(RolloutServer PROPERTIES TIMEOUT 240)

# End to end with the real binaries; needs the server's rollout wiring.
add_executable(rollout_e2e_tests
  ${CMAKE_CURRENT_LIST_DIR}/rollout_e2e_test.cc)
target_link_libraries(rollout_e2e_tests PRIVATE
  weightpath_server_test_support weightpath_agent_lib weightpath_policy weightpath_testing)
target_compile_definitions(rollout_e2e_tests PRIVATE
  WEIGHTPATHCTL_PATH="$<TARGET_FILE:weightpathctl>"
  WEIGHTPATH_AGENT_PATH="$<TARGET_FILE:weightpath-agent>"
  WEIGHTPATH_FAKE_ENGINE="${CMAKE_CURRENT_LIST_DIR}/fake_engine.py")
add_dependencies(rollout_e2e_tests weightpath-server weightpathctl weightpath-agent)
weightpath_warnings(rollout_e2e_tests)
gtest_discover_tests(rollout_e2e_tests TEST_PREFIX Rollout. DISCOVERY_TIMEOUT 60
                     PROPERTIES TIMEOUT 240)
