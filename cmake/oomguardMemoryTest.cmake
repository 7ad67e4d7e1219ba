# oomguard_add_memory_test(<name> SOURCES src... [BUDGETS file] [LINK lib...] [LABEL label])
#
# One call for a memory test binary of your project (find_package(oomguard), or oomguard's
# source tree added with add_subdirectory or FetchContent):
# - the executable <name> from SOURCES, linked with oomguard::gtest_main (GoogleTest, LibTorch,
#   the meter installed first, main) and LINK;
# - its tests discovered by ctest (gtest_discover_tests), labelled LABEL (default memory);
# - each test run with OOMGUARD_BUDGETS=BUDGETS (default: budgets.json beside the calling
#   CMakeLists.txt; it may not exist yet: OOMGUARD_ACCEPT=1 ctest writes it) and a per-test
#   seed counter in the build folder, so `ctest --repeat until-fail:N` tries a new seed each
#   time; the rest of the OOMGUARD_* environment (OOMGUARD_REPORT_DIR, OOMGUARD_CARD, ...)
#   is taken from where ctest runs;
# - enable_testing() for the calling folder: call it from your top-level CMakeLists.txt (or
#   call enable_testing() there yourself), else a plain `ctest` finds no test.
# enable_testing() works in the scope it is called from (a variable of the directory), so the
# public name is a macro around the function that does the rest.
macro(oomguard_add_memory_test)
  enable_testing()
  _oomguard_add_memory_test(${ARGV})
endmacro()

function(_oomguard_add_memory_test name)
  cmake_parse_arguments(arg "" "BUDGETS;LABEL" "SOURCES;LINK" ${ARGN})
  if(NOT arg_SOURCES)
    message(FATAL_ERROR "oomguard_add_memory_test(${name}): give its SOURCES")
  endif()
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "oomguard_add_memory_test(${name}): unknown arguments "
      "${arg_UNPARSED_ARGUMENTS} (<name> SOURCES ... [BUDGETS file] [LINK ...] [LABEL label])")
  endif()
  if(NOT arg_BUDGETS)
    set(arg_BUDGETS budgets.json)
  endif()
  cmake_path(ABSOLUTE_PATH arg_BUDGETS BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  if(NOT arg_LABEL)
    set(arg_LABEL memory)
  endif()
  if(NOT TARGET oomguard::gtest_main)
    message(FATAL_ERROR "oomguard_add_memory_test(${name}): this oomguard has no "
      "oomguard::gtest_main (built without its GoogleTest layer, OOMGUARD_BUILD_GTEST=OFF, or "
      "installed with GoogleTest built from its own sources)")
  endif()

  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE oomguard::gtest_main ${arg_LINK})
  set(counters ${CMAKE_CURRENT_BINARY_DIR}/oomguard-seeds)
  file(MAKE_DIRECTORY ${counters})
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${arg_LABEL})
  # gtest_discover_tests of CMake 3.25 cannot pass a list (ENVIRONMENT has two entries): a
  # file that ctest reads after the discovery sets it on the discovered tests.
  set(file ${CMAKE_CURRENT_BINARY_DIR}/${name}_oomguard_environment.cmake)
  file(WRITE ${file} "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES "
    "ENVIRONMENT [==[OOMGUARD_BUDGETS=${arg_BUDGETS};OOMGUARD_SEED_COUNTER_DIR=${counters}]==])\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${file})
endfunction()
