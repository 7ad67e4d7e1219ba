# LibTorch for oomguard's build, wrapped in oomguard::torch (cmake/oomguardTorch.cmake).
# Found through CMAKE_PREFIX_PATH, or through the torch package of OOMGUARD_TORCH_PYTHON
# (ci/setup.sh passes the virtual environment's python; the package is located, not
# imported, so a wheel without its NVIDIA libraries serves). A parent project that found
# Torch already is used as it is.
#
# OOMGUARD_CUDA: AUTO (default) links the whole LibTorch and compiles the CUDA meter where a
# CUDA toolkit is found (nvcc in CUDA_HOME, CUDA_PATH, PATH or /usr/local/cuda), and the CPU
# half of a CUDA LibTorch where none is (cmake/oomguardTorchCpu.cmake); ON requires the
# toolkit; OFF takes the CPU half even where a toolkit is.
set(OOMGUARD_CUDA AUTO CACHE STRING "CUDA meter and the whole LibTorch: AUTO, ON or OFF")
set_property(CACHE OOMGUARD_CUDA PROPERTY STRINGS AUTO ON OFF)
if(NOT OOMGUARD_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "OOMGUARD_CUDA is '${OOMGUARD_CUDA}': give AUTO, ON or OFF")
endif()

if(NOT TARGET torch)
  set(_oomguard_torch_prefix "")
  if(OOMGUARD_TORCH_PYTHON)
    execute_process(
      COMMAND ${OOMGUARD_TORCH_PYTHON} -c "import importlib.util, os; s = importlib.util.find_spec('torch'); print(os.path.join(s.submodule_search_locations[0], 'share', 'cmake'))"
      OUTPUT_VARIABLE _oomguard_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _oomguard_torch_rc ERROR_QUIET)
    if(NOT _oomguard_torch_rc EQUAL 0 OR NOT EXISTS "${_oomguard_torch_prefix}/Torch")
      message(FATAL_ERROR "${OOMGUARD_TORCH_PYTHON} has no torch package; run ci/setup.sh")
    endif()
    list(APPEND CMAKE_PREFIX_PATH ${_oomguard_torch_prefix})
  endif()
  if(NOT _oomguard_torch_prefix)
    # Where find_package(Torch) would look: Torch_DIR, else CMAKE_PREFIX_PATH entries that are
    # torch.utils.cmake_prefix_path (<prefix>/Torch) or a LibTorch (<prefix>/share/cmake/Torch).
    if(Torch_DIR AND EXISTS "${Torch_DIR}/TorchConfig.cmake")
      set(_oomguard_torch_config_dir "${Torch_DIR}")
    else()
      find_path(_oomguard_torch_config_dir TorchConfig.cmake
        PATH_SUFFIXES Torch share/cmake/Torch NO_CACHE)
    endif()
    if(_oomguard_torch_config_dir)
      get_filename_component(_oomguard_torch_prefix "${_oomguard_torch_config_dir}/.." ABSOLUTE)
    endif()
  endif()

  # A CUDA LibTorch (libtorch_cuda beside libtorch_cpu) needs a toolkit for its own config.
  set(_oomguard_cuda_libtorch FALSE)
  if(_oomguard_torch_prefix AND EXISTS "${_oomguard_torch_prefix}/../../lib/libtorch_cuda.so")
    set(_oomguard_cuda_libtorch TRUE)
  endif()
  find_program(OOMGUARD_NVCC nvcc HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda
    PATH_SUFFIXES bin DOC "nvcc of the CUDA toolkit LibTorch's config looks for")
  set(_oomguard_cpu_half FALSE)
  if(_oomguard_cuda_libtorch AND (OOMGUARD_CUDA STREQUAL "OFF"
      OR (OOMGUARD_CUDA STREQUAL "AUTO" AND NOT OOMGUARD_NVCC)))
    set(_oomguard_cpu_half TRUE)
  elseif(OOMGUARD_CUDA STREQUAL "ON" AND NOT OOMGUARD_NVCC)
    message(FATAL_ERROR "OOMGUARD_CUDA=ON: no CUDA toolkit found (nvcc in CUDA_HOME, "
      "CUDA_PATH, PATH or /usr/local/cuda); install one, or configure with OOMGUARD_CUDA=AUTO")
  endif()

  if(_oomguard_cpu_half)
    set(OOMGUARD_TORCH_CPU_DIR "${_oomguard_torch_prefix}/Torch")
    include(oomguardTorchCpu)
    if(OOMGUARD_NVCC)
      message(STATUS "oomguard: the CPU half of LibTorch (OOMGUARD_CUDA=OFF): no CUDA meter")
    else()
      message(STATUS "oomguard: the CPU half of LibTorch (no CUDA toolkit found): no CUDA meter")
    endif()
  else()
    get_directory_property(_oomguard_imported_before IMPORTED_TARGETS)
    find_package(Torch REQUIRED)
    # Torch's imported targets are visible in this directory only; a parent project linking
    # oomguard's targets must see them too (add_subdirectory, FetchContent).
    get_directory_property(_oomguard_imported_after IMPORTED_TARGETS)
    list(REMOVE_ITEM _oomguard_imported_after ${_oomguard_imported_before})
    foreach(_oomguard_target IN LISTS _oomguard_imported_after)
      set_property(TARGET ${_oomguard_target} PROPERTY IMPORTED_GLOBAL TRUE)
    endforeach()
  endif()
elseif(NOT Torch_DIR OR NOT DEFINED TORCH_LIBRARIES)
  message(FATAL_ERROR "oomguard: a target named torch exists but Torch_DIR/TORCH_LIBRARIES do "
    "not: call find_package(Torch) in the parent project, or leave Torch to oomguard")
endif()
if(NOT OOMGUARD_TORCH_CPU_ONLY)
  set(OOMGUARD_TORCH_CPU_ONLY FALSE)
endif()
if(OOMGUARD_CUDA STREQUAL "ON" AND NOT TORCH_CUDA_LIBRARIES)
  message(FATAL_ERROR "OOMGUARD_CUDA=ON, but the LibTorch in ${Torch_DIR} has no CUDA: no "
    "CUDA meter could be built; use a LibTorch with CUDA (PyPI's torch wheel)")
endif()
message(STATUS "oomguard: LibTorch ${Torch_VERSION} from ${Torch_DIR}")
include(oomguardTorch)

# A LibTorch built with the pre-C++11 std::string ABI (PyPI wheels up to 2.6, the
# "pre-cxx11" zips) says so in TORCH_CXX_FLAGS. Every oomguard target must then use that ABI,
# not only those linking Torch (the allocator model, the log library), and so must the C++
# libraries they link: GoogleTest is built from its sources (dependencies.cmake) and spdlog
# and fmt are used header-only, Google Benchmark is left out.
set(OOMGUARD_TORCH_OLD_ABI OFF)
if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  set(OOMGUARD_TORCH_OLD_ABI ON)
  add_compile_definitions(_GLIBCXX_USE_CXX11_ABI=0)
  message(STATUS "oomguard: LibTorch uses the pre-C++11 ABI; so does every target here")
endif()
