#include <oomguard/memory/tracking_allocator.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <oomguard/memory/sizes.h>

namespace oomguard::memory {
namespace {

// Each block carries its size and its observed id (0: none) in a header, so a free needs no
// lookup table. The header is one full alignment unit, so the data pointer keeps c10's
// 64-byte alignment.
constexpr size_t kHeader = 64;
struct Header {
  int64_t bytes;  // what its free takes off the count: 0 when allocated uncounted
  int64_t id;
  int64_t size;  // the bytes asked for
};
// Larger requests cannot be counted in an int64_t nor carry a header: refused as an OOM.
constexpr size_t kLargestRequest =
    static_cast<size_t>(std::numeric_limits<int64_t>::max()) - kHeader;

std::atomic<TrackingAllocator::BeforeAllocate> g_before_allocate{nullptr};
thread_local int g_uncounted_depth = 0;  // UncountedHere guards alive on this thread

void raise_peak(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

TrackingAllocator& TrackingAllocator::instance() {
  static TrackingAllocator* tracker = [] {
    auto* t = new TrackingAllocator(false);  // never destroyed: frees may come at exit
    c10::SetCPUAllocator(t, /*priority=*/100);
    return t;
  }();
  return *tracker;
}

TrackingAllocator& TrackingAllocator::meta() {
  static TrackingAllocator* tracker = [] {
    auto* t = new TrackingAllocator(true);
    c10::SetAllocator(c10::DeviceType::Meta, t, /*priority=*/100);
    return t;
  }();
  return *tracker;
}

c10::DeleterFnPtr TrackingAllocator::raw_deleter() const {
  return meta_ ? &release_meta : &release_cpu;
}

namespace {
// Installs the tracker while the program starts, before the static initializers of its own
// files (priority 101 runs before every default-priority one of the same binary), so that
// nothing the program allocates escapes the meter: a model built in a static, a test
// fixture, a test suite's SetUp. LibTorch's own libraries have started by then.
struct InstallAtStartup {
  InstallAtStartup() { TrackingAllocator::instance(); }
};
__attribute__((init_priority(101))) const InstallAtStartup g_install_at_startup;
}  // namespace

c10::DataPtr TrackingAllocator::allocate(size_t nbytes) {
  if (nbytes > kLargestRequest) {
    num_ooms_.fetch_add(1);
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        false,
        "CPU out of memory. Tried to allocate ",
        nbytes,
        " bytes, more than any allocator can hand out.");
  }
  const c10::Device device(meta_ ? c10::DeviceType::Meta : c10::DeviceType::CPU);
  // On Meta the header and one byte, so that each data pointer is an address of its own block
  // (no kernel reads it).
  const size_t behind = meta_ ? 1 : nbytes;
  if (!counting_.load(std::memory_order_relaxed) || g_uncounted_depth > 0) {
    // The header says 0 bytes, so the free of this block changes no count either.
    void* base = c10::alloc_cpu(behind + kHeader);
    const Header header{0, 0, static_cast<int64_t>(nbytes)};
    std::memcpy(base, &header, sizeof(header));
    void* data = static_cast<char*>(base) + kHeader;
    return {data, data, raw_deleter(), device};
  }
  if (BeforeAllocate hook = g_before_allocate.load(std::memory_order_relaxed))
    hook();
  const auto n = static_cast<int64_t>(nbytes);
  int64_t now = 0;
  Header header{n, count(n, now), n};
  void* base = nullptr;
  try {
    base = c10::alloc_cpu(behind + kHeader);
  } catch (...) {
    uncount(n, header.id);
    throw;
  }
  settle(n, now);
  std::memcpy(base, &header, sizeof(header));
  void* data = static_cast<char*>(base) + kHeader;
  // The context equals the data pointer: oneDNN's raw_allocate relies on it.
  return {data, data, raw_deleter(), device};
}

int64_t TrackingAllocator::count(int64_t n, int64_t& now) {
  now = allocated_.fetch_add(n, std::memory_order_relaxed) + n;
  const int64_t cap = capacity_.load(std::memory_order_relaxed);
  if (cap > 0 && now > cap) {
    allocated_.fetch_sub(n, std::memory_order_relaxed);
    throw_oom(n, now - n);
  }
  int64_t id = 0;
  try {
    if (n > 0 && observed_.load(std::memory_order_relaxed))
      id = observe_alloc(n);
  } catch (...) {
    allocated_.fetch_sub(n, std::memory_order_relaxed);
    throw;
  }
  return id;
}

void TrackingAllocator::settle(int64_t n, int64_t now) {
  raise_peak(peak_, now);
  num_allocs_.fetch_add(1, std::memory_order_relaxed);
  total_allocated_.fetch_add(n, std::memory_order_relaxed);
}

void TrackingAllocator::uncount(int64_t n, int64_t id) {
  allocated_.fetch_sub(n, std::memory_order_relaxed);
  if (id != 0)
    observe_free(id);
}

TrackingAllocator::UncountedHere::UncountedHere() {
  ++g_uncounted_depth;
}

TrackingAllocator::UncountedHere::~UncountedHere() {
  --g_uncounted_depth;
}

bool TrackingAllocator::counted_here() {
  return g_uncounted_depth == 0;
}

void TrackingAllocator::count_now(const c10::DataPtr& ptr) {
  if (ptr.get_deleter() != raw_deleter() || ptr.get() == nullptr || g_uncounted_depth > 0 ||
      !counting_.load(std::memory_order_relaxed))
    return;  // not this instance's, or counted by no one now
  if (BeforeAllocate hook = g_before_allocate.load(std::memory_order_relaxed))
    hook();
  char* base = static_cast<char*>(ptr.get()) - kHeader;
  Header header{};
  std::memcpy(&header, base, sizeof(header));
  if (header.bytes != 0 || header.size == 0)
    return;
  int64_t now = 0;
  header.bytes = header.size;
  header.id = count(header.size, now);
  settle(header.size, now);
  std::memcpy(base, &header, sizeof(header));
}

int64_t TrackingAllocator::allocation_id(const c10::DataPtr& ptr) {
  if ((ptr.get_deleter() != &release_cpu && ptr.get_deleter() != &release_meta) ||
      ptr.get() == nullptr)
    return 0;
  Header header{};
  std::memcpy(&header, static_cast<const char*>(ptr.get()) - kHeader, sizeof(header));
  return header.id;
}

void TrackingAllocator::set_before_allocate(BeforeAllocate hook) {
  g_before_allocate.store(hook);
}

void TrackingAllocator::release_cpu(void* ptr) {
  instance().release(ptr);
}

void TrackingAllocator::release_meta(void* ptr) {
  meta().release(ptr);
}

void TrackingAllocator::release(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  void* base = static_cast<char*>(ptr) - kHeader;
  Header header{};
  std::memcpy(&header, base, sizeof(header));
  allocated_.fetch_sub(header.bytes, std::memory_order_relaxed);
  if (header.id != 0 && observed_.load(std::memory_order_relaxed))
    observe_free(header.id);  // once the observers are gone, its free concerns nobody
  c10::free_cpu(base);
}

int64_t TrackingAllocator::observe_alloc(int64_t bytes) {
  std::lock_guard<std::mutex> lock(observers_mutex_);
  const int64_t id = ++last_id_;
  for (size_t i = 0; i < observers_.size(); ++i) {
    try {
      observers_[i].observer->on_alloc(id, bytes);
    } catch (...) {
      // Refused: the observers that saw it see its free, so all agree it never lived.
      for (size_t j = 0; j < i; ++j)
        observers_[j].observer->on_free(id);
      throw;
    }
  }
  return id;
}

void TrackingAllocator::observe_free(int64_t id) {
  std::lock_guard<std::mutex> lock(observers_mutex_);
  for (const Watch& w : observers_)
    if (id >= w.first_id)
      w.observer->on_free(id);
}

void TrackingAllocator::add_observer(AllocationObserver* observer) {
  std::lock_guard<std::mutex> lock(observers_mutex_);
  observers_.push_back({observer, last_id_ + 1});
  observed_.store(true);
}

void TrackingAllocator::remove_observer(AllocationObserver* observer) {
  std::lock_guard<std::mutex> lock(observers_mutex_);
  observers_.erase(
      std::remove_if(
          observers_.begin(),
          observers_.end(),
          [observer](const Watch& w) { return w.observer == observer; }),
      observers_.end());
  observed_.store(!observers_.empty());
}

void TrackingAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  default_copy_data(dest, src, count);
}

MemoryStats TrackingAllocator::stats() const {
  if (BeforeAllocate hook = g_before_allocate.load(std::memory_order_relaxed))
    hook();  // what is gone is not read as allocated
  MemoryStats s;
  s.allocated_bytes = allocated_.load();
  s.peak_allocated_bytes = peak_.load();
  s.num_ooms = num_ooms_.load();
  return s;
}

void TrackingAllocator::reset_peak() {
  peak_.store(allocated_.load());
}

void TrackingAllocator::throw_oom(int64_t requested, int64_t allocated) {
  num_ooms_.fetch_add(1);
  const int64_t cap = capacity_.load();
  const auto mib = [](int64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
    return std::string(buf);
  };
  // Same shape as the CUDA caching allocator's message, so one handler serves both.
  TORCH_CHECK_WITH(
      OutOfMemoryError,
      false,
      meta_ ? "Meta" : "CPU",
      " out of memory (emulated card). Tried to allocate ",
      mib(requested),
      ". Emulated card has a total capacity of ",
      format_size(cap),
      " of which ",
      mib(cap - allocated),
      " is free. Of the allocated memory ",
      mib(allocated),
      " is allocated by PyTorch.");
}

}  // namespace oomguard::memory
