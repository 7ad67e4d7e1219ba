// CachingAllocator's OOM: the message as each LibTorch words it (reference section 5).
#include <algorithm>
#include <cstdio>

#include <oomguard/sim/caching_allocator.h>

namespace oomguard::sim {

std::string torch_format_size(int64_t bytes) {
  char text[48];
  if (bytes <= 1024)
    std::snprintf(text, sizeof(text), "%lld bytes", static_cast<long long>(bytes));
  else if (bytes <= kMiB)
    std::snprintf(text, sizeof(text), "%.2f KiB", static_cast<double>(bytes) / 1024.0);
  else if (bytes <= 1024 * kMiB)
    std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(bytes) / double(kMiB));
  else
    std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / double(1024 * kMiB));
  return text;
}

void CachingAllocator::fail(int64_t requested, int64_t alloc_size) {
  ++stats_.num_ooms;
  const int64_t allocated = stats_.allocated_bytes.current;
  const int64_t reserved = stats_.reserved_bytes.current;
  const int64_t total = device_.total_bytes;
  const std::string free = torch_format_size(std::min(driver_free(), total));
  if (settings_.torch_version < 201) {  // 1.13 and 2.0: one parenthesised sentence
    std::string message = "CUDA out of memory. Tried to allocate " + torch_format_size(alloc_size) +
                          " (GPU 0; " + torch_format_size(total) + " total capacity; " +
                          torch_format_size(allocated) + " already allocated; " + free + " free; ";
    if (device_.allowed_bytes > 0)
      message += torch_format_size(device_.allowed_bytes) + " allowed; ";
    message += torch_format_size(reserved) +
               " reserved in total by PyTorch) If reserved memory is >> allocated memory try "
               "setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
               "Management and PYTORCH_CUDA_ALLOC_CONF";
    last_oom_ = OomInfo{requested, alloc_size, std::move(message), largest_free_block()};
    return;
  }
  std::string message = "CUDA out of memory. Tried to allocate " + torch_format_size(alloc_size) +
                        ". GPU 0 has a total capacity of " + torch_format_size(total) +
                        " of which " + free + " is free. ";
  if (device_.allowed_bytes > 0)
    message += torch_format_size(device_.allowed_bytes) + " allowed; ";
  message += "Of the allocated memory " + torch_format_size(allocated) +
             " is allocated by PyTorch, and " + torch_format_size(reserved - allocated) +
             " is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
             "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
             "fragmentation.  See documentation for Memory Management  "
             "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";
  last_oom_ = OomInfo{requested, alloc_size, std::move(message), largest_free_block()};
}

}  // namespace oomguard::sim
