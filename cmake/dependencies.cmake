# Everything but Torch comes from Debian packages (ci/setup.sh installs them). Where one is
# missing, as on a GPU machine holding only PyTorch, CUDA and a compiler, third_party/ stands
# in: ci/vendor-deps.sh fills it from those same packages, and it travels with the tree
# (ci/gpu-sanity.sh). Google Benchmark is optional: without it there is no oomguard_bench.
set(OOMGUARD_THIRD_PARTY ${PROJECT_SOURCE_DIR}/third_party)

function(oomguard_vendored_headers target package)
  if(NOT EXISTS ${OOMGUARD_THIRD_PARTY}/include)
    message(FATAL_ERROR "${package} not found: install it (ci/setup.sh does) or run "
      "ci/vendor-deps.sh on a machine that has it and bring third_party/ along")
  endif()
  string(MAKE_C_IDENTIFIER "oomguard_vendored_${package}" name)
  add_library(${name} INTERFACE)
  target_include_directories(${name} SYSTEM INTERFACE ${OOMGUARD_THIRD_PARTY}/include)
  add_library(${target} ALIAS ${name})
  message(STATUS "oomguard: ${package} from third_party/")
endfunction()

if(NOT TARGET nlohmann_json::nlohmann_json)
  find_package(nlohmann_json 3.10 QUIET)
  if(NOT nlohmann_json_FOUND)
    oomguard_vendored_headers(nlohmann_json::nlohmann_json nlohmann_json)
  endif()
endif()
if(OOMGUARD_BUILD_CLI)  # the libraries need neither
  find_package(spdlog QUIET)
  if(NOT spdlog_FOUND)
    oomguard_vendored_headers(spdlog::spdlog spdlog)
    target_compile_definitions(oomguard_vendored_spdlog INTERFACE SPDLOG_HEADER_ONLY FMT_HEADER_ONLY)
  endif()
  find_package(CLI11 QUIET)
  if(NOT CLI11_FOUND)
    oomguard_vendored_headers(CLI11::CLI11 CLI11)
  endif()
endif()
find_package(Threads REQUIRED)
if((OOMGUARD_BUILD_GTEST OR OOMGUARD_BUILD_TESTS) AND NOT TARGET GTest::gtest)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    if(NOT EXISTS ${OOMGUARD_THIRD_PARTY}/googletest/CMakeLists.txt)
      message(FATAL_ERROR "GoogleTest not found: install libgtest-dev (ci/setup.sh does) or "
        "run ci/vendor-deps.sh and bring third_party/ along")
    endif()
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    add_subdirectory(${OOMGUARD_THIRD_PARTY}/googletest ${PROJECT_BINARY_DIR}/googletest
      EXCLUDE_FROM_ALL SYSTEM)
    if(NOT TARGET GTest::gtest)  # recent GoogleTest defines these itself
      add_library(GTest::gtest ALIAS gtest)
      add_library(GTest::gtest_main ALIAS gtest_main)
    endif()
    message(STATUS "oomguard: GoogleTest from third_party/")
  endif()
endif()
if(OOMGUARD_BUILD_TESTS)
  find_package(benchmark QUIET)
endif()
