# A real Prometheus (/usr/bin/prometheus, Debian's package) scraping the real
# weightpath-server on loopback ports the test picks (CTest names start with
# "E2ePrometheus").
add_executable(e2e_prometheus_tests ${CMAKE_CURRENT_LIST_DIR}/prometheus_scrape_test.cc)
target_link_libraries(e2e_prometheus_tests PRIVATE weightpath_server_test_support weightpath_testing)
add_dependencies(e2e_prometheus_tests weightpath-server)
weightpath_warnings(e2e_prometheus_tests)
gtest_discover_tests(e2e_prometheus_tests DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
