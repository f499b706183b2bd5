# packoracle_warnings(target): the warning set every packoracle target compiles with.
function(packoracle_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow)
  if(PACKORACLE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
