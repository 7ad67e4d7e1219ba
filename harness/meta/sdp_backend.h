#pragma once
// The attention kernels' numbers that _fused_sdp_choice answers (math 0, flash 1, ...):
// at::SDPBackend from LibTorch 2.6, sdp::SDPBackend (the same values) before.
#if __has_include(<ATen/SDPBackend.h>)
#include <ATen/SDPBackend.h>
namespace oomguard::meta {
using SdpBackend = at::SDPBackend;
}
#else
#include <ATen/native/transformers/sdp_utils_cpp.h>
namespace oomguard::meta {
using SdpBackend = sdp::SDPBackend;
}
#endif
