# oomguard::torch: LibTorch as one INTERFACE target, for oomguard's own build and for the
# installed package (oomguardConfig.cmake includes this file after find_dependency(Torch)).
# Expects a found Torch (TORCH_LIBRARIES, TORCH_INCLUDE_DIRS, TORCH_CXX_FLAGS, Torch_DIR).
#
# The pip wheel's CUDA libraries (cuDNN, NCCL, cuBLAS...) live in site-packages/nvidia/*/lib;
# libtorch_cuda finds them at run time through its own RPATH, but the linker needs telling,
# or the link fails with undefined references such as ncclCommResume.
if(NOT TARGET oomguard::torch)
  add_library(oomguard::torch INTERFACE IMPORTED GLOBAL)
  # SYSTEM (the default for imported targets): Torch's headers do not flood our warnings.
  set_target_properties(oomguard::torch PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${TORCH_LIBRARIES}"
    INTERFACE_COMPILE_OPTIONS "${TORCH_CXX_FLAGS}")
  get_filename_component(_oomguard_site "${Torch_DIR}/../../../.." ABSOLUTE)
  file(GLOB _oomguard_nvidia_libs LIST_DIRECTORIES true "${_oomguard_site}/nvidia/*/lib")
  if(_oomguard_nvidia_libs)
    list(JOIN _oomguard_nvidia_libs ":" _oomguard_nvidia_path)
    set_property(TARGET oomguard::torch PROPERTY INTERFACE_LINK_OPTIONS
      "LINKER:-rpath-link,${_oomguard_nvidia_path}" "LINKER:-rpath,${_oomguard_nvidia_path}")
  endif()
  unset(_oomguard_site)
  unset(_oomguard_nvidia_libs)
  unset(_oomguard_nvidia_path)
endif()
