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
  if(spdlog_FOUND AND OOMGUARD_TORCH_OLD_ABI AND TARGET spdlog::spdlog_header_only)
    # Debian's compiled spdlog and fmt use the C++11 ABI: header-only, they take this one.
    add_library(oomguard_spdlog_header_only INTERFACE)
    target_link_libraries(oomguard_spdlog_header_only INTERFACE spdlog::spdlog_header_only)
    target_compile_definitions(oomguard_spdlog_header_only INTERFACE FMT_HEADER_ONLY)
    add_library(oomguard::spdlog ALIAS oomguard_spdlog_header_only)
  elseif(spdlog_FOUND)
    add_library(oomguard::spdlog ALIAS spdlog::spdlog)
  endif()
  if(NOT spdlog_FOUND)
    oomguard_vendored_headers(spdlog::spdlog spdlog)
    target_compile_definitions(oomguard_vendored_spdlog INTERFACE SPDLOG_HEADER_ONLY FMT_HEADER_ONLY)
    add_library(oomguard::spdlog ALIAS oomguard_vendored_spdlog)
  endif()
  find_package(CLI11 QUIET)
  if(NOT CLI11_FOUND)
    oomguard_vendored_headers(CLI11::CLI11 CLI11)
  endif()
endif()
find_package(Threads REQUIRED)
if((OOMGUARD_BUILD_GTEST OR OOMGUARD_BUILD_TESTS) AND NOT TARGET GTest::gtest)
  # Debian's libgtest is compiled with the C++11 ABI: with a pre-C++11 LibTorch, GoogleTest is
  # built from its sources (Debian's libgtest-dev ships them in /usr/src/googletest).
  if(NOT OOMGUARD_TORCH_OLD_ABI)
    find_package(GTest QUIET)
  endif()
  if(NOT GTest_FOUND)
    set(_oomguard_gtest_source ${OOMGUARD_THIRD_PARTY}/googletest)
    if(NOT EXISTS ${_oomguard_gtest_source}/CMakeLists.txt)
      set(_oomguard_gtest_source /usr/src/googletest)
    endif()
    if(NOT EXISTS ${_oomguard_gtest_source}/CMakeLists.txt)
      message(FATAL_ERROR "GoogleTest not found: install libgtest-dev (ci/setup.sh does) or "
        "run ci/vendor-deps.sh and bring third_party/ along")
    endif()
    set(OOMGUARD_GTEST_FROM_SOURCE ON)  # not installable with oomguard's package (install.cmake)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
    add_subdirectory(${_oomguard_gtest_source} ${PROJECT_BINARY_DIR}/googletest
      EXCLUDE_FROM_ALL SYSTEM)
    if(NOT TARGET GTest::gtest)  # recent GoogleTest defines these itself
      add_library(GTest::gtest ALIAS gtest)
      add_library(GTest::gtest_main ALIAS gtest_main)
    endif()
    message(STATUS "oomguard: GoogleTest from ${_oomguard_gtest_source}")
  endif()
endif()
if(OOMGUARD_BUILD_TESTS AND NOT OOMGUARD_TORCH_OLD_ABI)  # Debian's is C++11-ABI only
  find_package(benchmark QUIET)
endif()
