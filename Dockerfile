# weightpath-server in a container: built from this tree on Debian 12, run on
# debian:12-slim as a non-root user with only the runtime libraries (the
# weightpath-server package's Depends, resolved by apt). There is no
# container engine on the development machines: this file is kept minimal and
# is not built by the tests; the package it installs is (tests/packaging).
#   docker build -t weightpath-server .
#   docker run -p 50051:50051 -p 9464:9464 weightpath-server
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      cmake ninja-build g++ pkg-config dpkg-dev file \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev libspdlog-dev prometheus-cpp-dev libyaml-cpp-dev \
      libgtest-dev libgmock-dev libbenchmark-dev \
      libsqlite3-dev libpq-dev libcurl4-openssl-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    && cmake --build /build --target weightpath-server \
    && cd /build && cpack -G DEB -D CPACK_COMPONENTS_ALL=server -B /debs

FROM debian:12-slim
COPY --from=build /debs/weightpath-server_*.deb /tmp/
# The package's postinst creates the `weightpath` user and its state
# directory; apt pulls exactly the runtime libraries it depends on.
RUN apt-get update && apt-get install -y --no-install-recommends /tmp/weightpath-server_*.deb \
    && rm -rf /var/lib/apt/lists/* /tmp/*.deb
USER weightpath
WORKDIR /var/lib/weightpath-server
# In a container the ports must be reachable from outside it: plaintext on a
# non-loopback address needs --insecure (put TLS in front, or pass --tls_cert
# and --tls_key and drop --insecure).
EXPOSE 50051 9464
ENTRYPOINT ["/usr/bin/weightpath-server", "--config", "/etc/weightpath/server.yaml", \
            "--listen", "0.0.0.0:50051", "--metrics_listen", "0.0.0.0:9464"]
CMD ["--insecure"]
