# spmd_precompile_headers(<target> <header>...): the target's files compile against one
# precompiled header of what most of them include (MLIR's IR headers, the frontend's Trace), so
# a build parses those once a target instead of once a file. Not in unity builds (CI's release
# build, the sanitizer builds: scripts/test.sh, asan.sh, tsan.sh): a unit already parses them
# once for 8 files, and the precompiled header would cost more than it saves there.
# (The test suites build one file a unit in every build, so theirs is set unconditionally in
# tests/CMakeLists.txt.) Headers are named as their #include says (<passes/Passes.h>), found through the include path.
function(spmd_precompile_headers target)
  if(CMAKE_UNITY_BUILD)
    return()
  endif()
  target_precompile_headers(${target} PRIVATE ${ARGN})
endfunction()
