#pragma once
// The order in which a seeded loader takes samples: one shuffle per epoch. No Torch, so that a
// run's inputs can be planned (app/worst_case.h) before anything runs.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace oomguard::data {

// The sample indices 0 .. samples - 1 in the order epoch `epoch` (from 0) of a loader seeded
// with `seed` takes them.
std::vector<size_t> epoch_order(size_t samples, uint64_t seed, uint64_t epoch);

// The first `draws` indices a loader seeded with `seed` takes: its epochs one after another.
std::vector<size_t> seeded_draws(size_t samples, uint64_t seed, size_t draws);

}  // namespace oomguard::data
