# LibTorch wrapped in one INTERFACE target, oomguard::torch.
# Found through CMAKE_PREFIX_PATH, or through the torch package of OOMGUARD_TORCH_PYTHON
# (ci/setup.sh passes the virtual environment's python).
if(OOMGUARD_TORCH_PYTHON)
  execute_process(
    COMMAND ${OOMGUARD_TORCH_PYTHON} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _oomguard_torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _oomguard_torch_rc ERROR_QUIET)
  if(NOT _oomguard_torch_rc EQUAL 0)
    message(FATAL_ERROR "${OOMGUARD_TORCH_PYTHON} cannot import torch; run ci/setup.sh")
  endif()
  list(APPEND CMAKE_PREFIX_PATH ${_oomguard_torch_prefix})
  # The wheel's CUDA libraries (cuDNN, NCCL, cuBLAS...) live in site-packages/nvidia/*/lib;
  # libtorch_cuda finds them at run time through its own RPATH, the linker needs telling.
  get_filename_component(_oomguard_site "${_oomguard_torch_prefix}/../../.." ABSOLUTE)
  file(GLOB _oomguard_nvidia_libs LIST_DIRECTORIES true "${_oomguard_site}/nvidia/*/lib")
  if(_oomguard_nvidia_libs)
    list(JOIN _oomguard_nvidia_libs ":" _oomguard_nvidia_path)
    set(OOMGUARD_TORCH_LINK_OPTIONS "LINKER:-rpath-link,${_oomguard_nvidia_path}"
        "LINKER:-rpath,${_oomguard_nvidia_path}")
  endif()
endif()

find_package(Torch REQUIRED)
message(STATUS "oomguard: LibTorch ${Torch_VERSION} from ${Torch_DIR}")

add_library(oomguard_torch INTERFACE)
add_library(oomguard::torch ALIAS oomguard_torch)
# SYSTEM so Torch's own headers do not flood our warnings.
target_include_directories(oomguard_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
target_link_libraries(oomguard_torch INTERFACE ${TORCH_LIBRARIES})
target_compile_options(oomguard_torch INTERFACE ${TORCH_CXX_FLAGS})
target_link_options(oomguard_torch INTERFACE ${OOMGUARD_TORCH_LINK_OPTIONS})
