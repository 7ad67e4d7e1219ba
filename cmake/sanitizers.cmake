# OOMGUARD_SANITIZE (preset asan): AddressSanitizer + UndefinedBehaviorSanitizer on every
# target, the precompiled header included (a PCH must be built with the flags of its users).
# UB stops the test at the first report instead of printing and going on. LibTorch itself
# is not instrumented; the runtime options are in
# tests/support/sanitizer_options.cpp, linked into each test executable.
if(OOMGUARD_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# OOMGUARD_FUZZ (preset fuzz, clang only): coverage for libFuzzer on every target; the fuzz
# targets link libFuzzer's main (tests/CMakeLists.txt).
option(OOMGUARD_FUZZ "Build the libFuzzer targets (clang)" OFF)
if(OOMGUARD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "OOMGUARD_FUZZ needs clang (libFuzzer); use preset fuzz")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
