# install() rules and three Debian packages (cpack -G DEB in the build
# directory): weightpath-server (binary, systemd unit, example config, a
# `weightpath` system user owning /var/lib/weightpath-server), weightpath-agent
# (binary, its two units, example config) and weightpathctl. Shared-library
# dependencies come from dpkg-shlibdeps, so the packages name Debian 12's
# runtime libraries, never the -dev ones. tests/packaging builds, unpacks
# and runs them.
include(GNUInstallDirs)

if(NOT WEIGHTPATH_AGENT_ONLY)
  install(TARGETS weightpath-server RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
  install(FILES deploy/systemd/weightpath-server.service DESTINATION lib/systemd/system
          COMPONENT server)
  install(FILES deploy/packaging/server/server.yaml DESTINATION /etc/weightpath COMPONENT server)
  install(FILES README.md DESTINATION share/doc/weightpath-server COMPONENT server)
endif()

install(TARGETS weightpath-agent RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT agent)
install(FILES deploy/systemd/weightpath-agent.service deploy/systemd/weightpath-agent-run.service
              deploy/systemd/weightpath-site-cache.service
        DESTINATION lib/systemd/system COMPONENT agent)
install(FILES examples/agent.yaml DESTINATION /etc/weightpath COMPONENT agent)
install(FILES agent/README.md DESTINATION share/doc/weightpath-agent COMPONENT agent)

if(NOT WEIGHTPATH_AGENT_ONLY)
  install(TARGETS weightpathctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ctl)
endif()

set(CPACK_GENERATOR DEB)
# cpack's install step leaves install_manifest_<component>.txt in this tree;
# the script removes them (it says why).
set(CPACK_WEIGHTPATH_BINARY_DIR ${CMAKE_BINARY_DIR})
set(CPACK_WEIGHTPATH_COMPONENTS server agent ctl)
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/CPackDropInstallManifests.cmake)
set(CPACK_PACKAGE_NAME weightpath)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "weightpath maintainers <weightpath@example.net>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Weight-path deployment for fleets of edge LLM devices")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING IGNORE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME weightpath-server)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deploy/packaging/server/postinst
    ${PROJECT_SOURCE_DIR}/deploy/packaging/server/postrm
    ${PROJECT_SOURCE_DIR}/deploy/packaging/server/conffiles)
set(CPACK_DEBIAN_AGENT_PACKAGE_NAME weightpath-agent)
# What the agent dlopen()s, which dpkg-shlibdeps cannot see: libcurl.so.4 for
# every download (agent/net/curl_library.h; CURLOPT_PROTOCOLS_STR needs
# 7.85), and the NVIDIA driver's libcuda.so.1 and libnvidia-ml.so.1 for the
# GPU probe (agent/probe/live_environment.cc). The driver's are Suggests: a
# CPU or Jetson device has no use for them, they come from non-free (or
# NVIDIA's own repository, or L4T) under other names, and the probe reports
# no discrete NVIDIA GPU without them.
set(CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS "libcurl4 (>= 7.85.0)")
set(CPACK_DEBIAN_AGENT_PACKAGE_SUGGESTS "libcuda1, libnvidia-ml1")
set(CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/deploy/packaging/agent/conffiles)
set(CPACK_DEBIAN_CTL_PACKAGE_NAME weightpathctl)
set(CPACK_COMPONENT_SERVER_DESCRIPTION "weightpath-server: the policy server over gRPC")
set(CPACK_COMPONENT_AGENT_DESCRIPTION "weightpath-agent: picks, fetches and verifies a device's weight build")
set(CPACK_COMPONENT_CTL_DESCRIPTION "weightpathctl: the operators' command line")
# An agent-only tree installs one component, which cpack packages as one
# monolithic package: give it the agent package's name, summary and
# conffiles, so it is the same weightpath-agent as the full tree's.
if(WEIGHTPATH_AGENT_ONLY)
  set(CPACK_DEB_COMPONENT_INSTALL OFF)
  set(CPACK_DEBIAN_PACKAGE_NAME ${CPACK_DEBIAN_AGENT_PACKAGE_NAME})
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CPACK_COMPONENT_AGENT_DESCRIPTION}")
  set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA})
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "${CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS}")
  set(CPACK_DEBIAN_PACKAGE_SUGGESTS "${CPACK_DEBIAN_AGENT_PACKAGE_SUGGESTS}")
endif()
# Cross-built (the arm64 agent of scripts/build-arm64): the package is for
# the target's architecture, and dpkg-shlibdeps names its dependencies from
# the sysroot's arm64 libraries and the dpkg database scripts/build-arm64
# keeps of the packages unpacked there (WEIGHTPATH_CROSS_DPKG_ADMINDIR), not
# from the host's. cpack reads the environment it hands dpkg-shlibdeps from
# CPACK_PROJECT_CONFIG_FILE at packaging time.
if(CMAKE_CROSSCOMPILING)
  set(WEIGHTPATH_CROSS_DEB_ARCH "" CACHE STRING "the Debian architecture cross-built for (arm64)")
  set(WEIGHTPATH_CROSS_DPKG_ADMINDIR "" CACHE PATH
      "dpkg database of the sysroot's packages, for dpkg-shlibdeps")
  if(WEIGHTPATH_CROSS_DEB_ARCH STREQUAL "" OR NOT IS_DIRECTORY "${WEIGHTPATH_CROSS_DPKG_ADMINDIR}")
    message(FATAL_ERROR "a cross build needs WEIGHTPATH_CROSS_DEB_ARCH and "
                        "WEIGHTPATH_CROSS_DPKG_ADMINDIR to package (scripts/build-arm64)")
  endif()
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${WEIGHTPATH_CROSS_DEB_ARCH})
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS
      ${CMAKE_SYSROOT}/lib/${CMAKE_LIBRARY_ARCHITECTURE}
      ${CMAKE_SYSROOT}/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
  file(WRITE ${CMAKE_BINARY_DIR}/CPackCrossEnvironment.cmake
    "set(ENV{DEB_HOST_ARCH} \"${WEIGHTPATH_CROSS_DEB_ARCH}\")\n"
    "set(ENV{DPKG_ADMINDIR} \"${WEIGHTPATH_CROSS_DPKG_ADMINDIR}\")\n")
  set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_BINARY_DIR}/CPackCrossEnvironment.cmake)
endif()
include(CPack)
