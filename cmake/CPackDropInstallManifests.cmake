# Run by cpack (CPACK_PRE_BUILD_SCRIPTS), once it has installed the
# components into its staging directory. It installs with the build tree's
# own cmake_install.cmake, which CMake generates to write
# install_manifest_<component>.txt into the build tree by absolute path,
# whatever cpack's -B: a packaging run left files there listing
# /usr/bin/weightpath-server, /etc/weightpath/server.yaml and the rest as if
# they had been installed on this machine, where `xargs rm <
# install_manifest_*.txt`, the usual uninstall, would delete a real
# installation's files. Nothing reads them; the staging directory is what is
# packaged. A tree that must stay read-only cannot be packaged in place:
# copy it first.
foreach(component IN LISTS CPACK_WEIGHTPATH_COMPONENTS)
  file(REMOVE "${CPACK_WEIGHTPATH_BINARY_DIR}/install_manifest_${component}.txt")
endforeach()
