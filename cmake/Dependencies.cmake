# Every dependency comes from a Debian 12 package (scripts/install-deps).
find_package(Threads REQUIRED)
find_package(gRPC CONFIG REQUIRED)       # also brings protobuf via FindProtobuf
find_package(absl CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)        # libfmt-dev, spdlog's own formatter
find_package(yaml-cpp CONFIG REQUIRED)
find_package(GTest CONFIG REQUIRED)
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)
# The server, store, weightpathctl and benchmarks' own (WEIGHTPATH_AGENT_ONLY
# builds none of them).
if(NOT WEIGHTPATH_AGENT_ONLY)
  find_package(spdlog CONFIG REQUIRED)
  find_package(prometheus-cpp CONFIG REQUIRED)
  find_package(benchmark CONFIG REQUIRED)
  find_package(SQLite3 REQUIRED)
  find_package(PostgreSQL REQUIRED)
endif()
