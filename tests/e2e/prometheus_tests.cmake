# A real Prometheus (/usr/bin/prometheus, Debian's package) scraping the real
# weightpath-server on loopback ports the test picks (CTest names start with
# "E2ePrometheus").
add_executable(e2e_prometheus_tests ${CMAKE_CURRENT_LIST_DIR}/prometheus_scrape_test.cc)
target_link_libraries(e2e_prometheus_tests PRIVATE weightpath_server_test_support weightpath_testing
  yaml-cpp)
target_compile_definitions(e2e_prometheus_tests PRIVATE WEIGHTPATH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_dependencies(e2e_prometheus_tests weightpath-server)
weightpath_warnings(e2e_prometheus_tests)
gtest_discover_tests(e2e_prometheus_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)

# deploy/prometheus/: the alert rules are valid (promtool check rules), fire
# as their unit tests say (promtool test rules), and are the file the Helm
# chart ships.
set(WEIGHTPATH_PROMETHEUS_DEPLOY_DIR ${PROJECT_SOURCE_DIR}/deploy/prometheus)
find_program(WEIGHTPATH_PROMTOOL promtool)
if(WEIGHTPATH_PROMTOOL)
  add_test(NAME PrometheusRules.Check
           COMMAND ${WEIGHTPATH_PROMTOOL} check rules
                   ${WEIGHTPATH_PROMETHEUS_DEPLOY_DIR}/weightpath-rules.yaml)
  add_test(NAME PrometheusRules.UnitTests
           COMMAND ${WEIGHTPATH_PROMTOOL} test rules weightpath-rules.test.yaml
           WORKING_DIRECTORY ${WEIGHTPATH_PROMETHEUS_DEPLOY_DIR})
else()
  # Reported as skipped rather than left out, so a machine without Debian's
  # prometheus package does not look as if the rules had been checked.
  foreach(test_name PrometheusRules.Check PrometheusRules.UnitTests)
    add_test(NAME ${test_name}
             COMMAND ${CMAKE_COMMAND} -E echo "promtool is not installed (scripts/install-deps adds it)")
    set_tests_properties(${test_name} PROPERTIES SKIP_REGULAR_EXPRESSION "promtool is not installed")
  endforeach()
endif()
add_test(NAME PrometheusRules.HelmChartShipsTheSameFile
         COMMAND ${CMAKE_COMMAND} -E compare_files
                 ${WEIGHTPATH_PROMETHEUS_DEPLOY_DIR}/weightpath-rules.yaml
                 ${PROJECT_SOURCE_DIR}/helm/weightpath/files/prometheus-rules.yaml)
