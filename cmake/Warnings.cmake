# Our own targets build with warnings as errors; third-party headers are
# included as SYSTEM by their imported targets and stay out of it.
function(weightpath_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Werror)
endfunction()
