# `cmake --build <dir> --target bench_agent_boot`: full boots of the built
# agent against the built server with the artifact cached (bench/agent_boot.sh).
add_custom_target(bench_agent_boot
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/agent_boot.sh $<TARGET_FILE:weightpath-agent>
          $<TARGET_FILE:weightpath-server>
  DEPENDS weightpath-agent weightpath-server
  USES_TERMINAL
  VERBATIM)
