#pragma once
// CPU meter: a counting c10::Allocator installed as the process's CPU allocator; the Meta
// device's storages counted the same way (TrackingAllocator::meta()).
#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include <c10/core/Allocator.h>

#include <oomguard/memory/meter.h>

namespace oomguard::memory {

// Sees each counted allocation (a process-wide id and its size) and its free, one event at
// a time. on_alloc may refuse the allocation by throwing c10::OutOfMemoryError: observers
// added after it then never see it. Frees arrive only for allocations the observer saw.
class AllocationObserver {
 public:
  virtual ~AllocationObserver() = default;
  virtual void on_alloc(int64_t id, int64_t bytes) = 0;
  virtual void on_free(int64_t id) = 0;
};

class TrackingAllocator final : public c10::Allocator, public Meter {
 public:
  // The process-wide instance, installed with c10::SetCPUAllocator on first use. It lives
  // for the whole process: tensors it handed out may be freed at any time.
  static TrackingAllocator& instance();
  // The Meta device's, installed with c10::SetAllocator(Meta) on first use: every storage
  // LibTorch makes on the Meta device (a tensor with sizes and no data) is counted, observed
  // and held to the capacity as the CPU's are, with no memory behind it (a 64-byte header of
  // bookkeeping each). Once meta::use_meta_device() has registered oomguard's Meta resize_
  // (<oomguard/meta/meta_device.h>), a storage that resize_ grows on Meta comes here too;
  // LibTorch's own Meta resize_ only records the new byte count.
  static TrackingAllocator& meta();

  c10::DataPtr allocate(size_t nbytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  std::string name() const override { return meta_ ? "meta" : "cpu"; }
  MemoryStats stats() const override;
  void reset_peak() override;

  // Emulated card: an allocation taking allocated above `bytes` throws
  // c10::OutOfMemoryError in PyTorch's format. 0 turns it off.
  void set_capacity(int64_t bytes) override { capacity_.store(bytes); }
  int64_t capacity() const { return capacity_.load(); }
  int64_t num_allocations() const { return num_allocs_.load(); }
  // Off: allocations go straight to c10's CPU allocator, uncounted and unchecked, as without
  // oomguard (what the meter costs is measured against this).
  void set_counting(bool on) { counting_.store(on); }
  // This thread's allocations, of either instance, uncounted while one lives (they nest), as
  // with set_counting(false) but for this thread alone: what a CPU kernel makes that the card's
  // kernel does not.
  class UncountedHere {
   public:
    UncountedHere();
    ~UncountedHere();
    UncountedHere(const UncountedHere&) = delete;
    UncountedHere& operator=(const UncountedHere&) = delete;
  };
  // False inside an UncountedHere of this thread.
  static bool counted_here();
  // Counts from now on a block this instance handed out uncounted (counting off, or inside an
  // UncountedHere), as if it were
  // allocated now (observed, held to the capacity: may throw c10::OutOfMemoryError); a block
  // already counted, or another allocator's, is left as it is. What a kernel returns is
  // counted this way when its scratch is not the card's: the kernel runs uncounted, then its
  // outputs are counted.
  void count_now(const c10::DataPtr& ptr);
  // Every byte ever handed out, freed or not: what allocation churn costs (CUDA's
  // allocated_bytes.all.allocated).
  int64_t total_allocated_bytes() const { return total_allocated_.load(); }

  // Observers are called in the order added, under one lock. Not owned; remove one before
  // destroying it.
  void add_observer(AllocationObserver* observer);
  // Stops calling `observer`; it sees no free of what it saw allocated from then on.
  void remove_observer(AllocationObserver* observer);
  // The id observers saw for the allocation `ptr` holds (AllocationObserver::on_alloc), or 0
  // when neither instance handed it out or no observer watched it.
  static int64_t allocation_id(const c10::DataPtr& ptr);
  // Called on the allocating thread before each counted allocation of either instance, before
  // its bytes are counted, and before stats() reads them (null: nothing). The CUDA autocast
  // emulation (<oomguard/amp/cuda_autocast.h>) releases its cast cache there once
  // clear_cache() has run, so the release lands before the next byte counts or is read.
  using BeforeAllocate = void (*)();
  static void set_before_allocate(BeforeAllocate hook);

 private:
  explicit TrackingAllocator(bool meta) : meta_(meta) {}
  static void release_cpu(void* ptr);
  static void release_meta(void* ptr);
  void release(void* ptr);
  int64_t observe_alloc(int64_t bytes);  // the allocation's id
  // An allocation's bytes counted (held to the capacity, observed): its id, and the allocated
  // bytes with it in `now`; settle() completes it once the block exists, uncount() takes it
  // back when the block could not be made.
  int64_t count(int64_t bytes, int64_t& now);
  void settle(int64_t bytes, int64_t now);
  void uncount(int64_t bytes, int64_t id);
  void observe_free(int64_t id);

  struct Watch {
    AllocationObserver* observer;
    int64_t first_id;  // allocations before it was added are not its business
  };
  std::mutex observers_mutex_;
  std::vector<Watch> observers_;
  std::atomic<bool> observed_{false};
  int64_t last_id_ = 0;  // under observers_mutex_
  [[noreturn]] void throw_oom(int64_t requested, int64_t allocated);

  std::atomic<int64_t> allocated_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> capacity_{0};
  std::atomic<int64_t> num_allocs_{0};
  std::atomic<int64_t> total_allocated_{0};
  std::atomic<bool> counting_{true};
  const bool meta_;  // the Meta device's: no memory behind an allocation
  std::atomic<int64_t> num_ooms_{0};
};

}  // namespace oomguard::memory
