#include "harness/app/worst_case.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace oomguard::app {
namespace {

// The positions of a batch whose longest sample has `length` bytes (data::collate).
int64_t positions_of(int64_t length, const WorstCaseData& d) {
  if (!d.pad_to_longest)
    return d.cut;
  return std::max<int64_t>(1, std::min(length, d.cut));
}

// Sample indices, the most positions first; ties in data order.
std::vector<size_t> by_positions(const WorstCaseData& d) {
  std::vector<size_t> order(d.lengths.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return positions_of(d.lengths[a], d) > positions_of(d.lengths[b], d);
  });
  return order;
}

WorstCaseStep make_step(std::vector<size_t> samples, const WorstCaseData& d) {
  WorstCaseStep step;
  step.positions = batch_positions(samples, d);
  step.samples = std::move(samples);
  return step;
}

// A batch: `leader` and batch_size - 1 more from `ranked`, from `next` on (cyclically).
std::vector<size_t> batch_led_by(
    size_t leader, const std::vector<size_t>& ranked, size_t next, const WorstCaseData& d) {
  std::vector<size_t> batch{leader};
  for (int64_t j = 1; j < d.batch_size; ++j)
    batch.push_back(ranked[(next + static_cast<size_t>(j - 1)) % ranked.size()]);
  return batch;
}

WorstCasePhase plan_train(const std::vector<size_t>& ranked, const WorstCaseData& d) {
  WorstCasePhase phase{"train", {}, d.train_steps, true, ""};
  const auto B = static_cast<size_t>(d.batch_size);
  if (d.train_steps >= 2) {
    // The first step: the next-longest samples; the second holds the longest.
    phase.steps.push_back(make_step(batch_led_by(ranked[1 % ranked.size()], ranked, 2, d), d));
    phase.steps.push_back(make_step(batch_led_by(ranked[0], ranked, B + 1, d), d));
    phase.how =
        "the second step's batch holds the longest sample, with AdamW's state from the "
        "first: the highest any step reaches; later steps repeat its shapes, so 2 of " +
        std::to_string(d.train_steps) + " steps run";
  } else if (d.train_steps == 1) {
    phase.steps.push_back(make_step(batch_led_by(ranked[0], ranked, 1, d), d));
    phase.how = "its one step's batch holds the longest sample";
  }
  return phase;
}

WorstCasePhase plan_evaluate(const std::vector<size_t>& ranked, const WorstCaseData& d) {
  WorstCasePhase phase{"evaluate", {}, d.evaluate_batches, true, ""};
  const auto m = static_cast<size_t>(d.evaluate_batches);
  const auto B = static_cast<size_t>(d.batch_size);
  const size_t n = ranked.size();
  if (m == 0)
    return phase;
  if (m * B <= n) {
    // One epoch: a sample once. Batch k is led by the (m - k)-th longest; the rest are shorter.
    for (size_t k = 0; k < m; ++k)
      phase.steps.push_back(
          make_step(batch_led_by(ranked[m - 1 - k], ranked, m + k * (B - 1), d), d));
    phase.how = "within one epoch each sample appears once: batch k holds the (" +
                std::to_string(m) + " - k)-th longest sample, the longest in the last";
    return phase;
  }
  // Past one epoch: every batch led by a sample of the most positions.
  const int64_t top = positions_of(d.lengths[ranked[0]], d);
  size_t tops = 0;
  while (tops < n && positions_of(d.lengths[ranked[tops]], d) == top)
    ++tops;
  for (size_t k = 0; k < m; ++k)
    phase.steps.push_back(make_step(batch_led_by(ranked[k % tops], ranked, tops + k, d), d));
  // Each epoch's batches can each hold one of them when there are enough of them.
  phase.attained = tops >= std::min(m, (n - 1) / B + 2);
  phase.how = std::string("the evaluation spans more than one epoch (") + std::to_string(m) +
              " batches of " + std::to_string(B) + ", " + std::to_string(n) +
              " samples): every batch holds a sample of the most positions" +
              (phase.attained ? ""
                              : ", an upper bound that no data order may reach (" +
                                    std::to_string(tops) + " such samples)");
  return phase;
}

WorstCasePhase plan_generate(const WorstCaseData& d) {
  WorstCasePhase phase{"generate", {}, 0, true, ""};
  std::vector<size_t> sources;
  int64_t longest = 0;
  for (size_t i = 0; i < d.lengths.size() && static_cast<int64_t>(sources.size()) < d.prompts;
       ++i) {
    if (d.lengths[i] >= d.prompt_length) {
      sources.push_back(i);
      longest = std::max(longest, d.lengths[i]);
    }
  }
  // As phases::generate: its sources' tokens are their bytes and an end token.
  const int64_t new_tokens =
      d.cap_new_tokens
          ? d.max_new_tokens
          : std::clamp(longest + 1 - d.prompt_length, int64_t{1}, d.max_seq_len - d.prompt_length);
  phase.steps_configured = new_tokens;
  phase.steps.push_back({sources, d.prompt_length + new_tokens});
  phase.how = d.synthetic ? "the first prompts of a corpus whose every sample is the longest"
                          : "the data file's own prompts: the first samples long enough, in "
                            "file order, whatever the seed";
  if (!d.cap_new_tokens)
    phase.how += "; unguarded, generating until the longest of them would end";
  return phase;
}

nlohmann::json steps_json(const WorstCasePhase& phase, const WorstCaseData& d) {
  nlohmann::json steps = nlohmann::json::array();
  for (const WorstCaseStep& s : phase.steps) {
    nlohmann::json lengths = nlohmann::json::array();
    for (const size_t i : s.samples)
      lengths.push_back(d.lengths[i]);
    steps.push_back({{"samples", s.samples}, {"lengths", lengths}, {"positions", s.positions}});
  }
  return steps;
}

std::string order_text(const std::vector<size_t>& order) {
  return nlohmann::json(order).dump();
}

}  // namespace

int64_t batch_positions(const std::vector<size_t>& samples, const WorstCaseData& d) {
  int64_t longest = 0;
  for (const size_t i : samples)
    longest = std::max(longest, d.lengths.at(i));
  return positions_of(longest, d);
}

WorstCasePlan plan_worst_case(const WorstCaseData& d) {
  if (d.lengths.empty())
    throw std::invalid_argument("worst case: no samples");
  const std::vector<size_t> ranked = by_positions(d);
  WorstCasePlan plan;
  plan.phases = {plan_train(ranked, d), plan_evaluate(ranked, d), plan_generate(d)};
  for (const WorstCaseStep& s : plan.phases[0].steps)
    plan.train_order.insert(plan.train_order.end(), s.samples.begin(), s.samples.end());
  for (const WorstCaseStep& s : plan.phases[1].steps)
    plan.evaluate_order.insert(plan.evaluate_order.end(), s.samples.begin(), s.samples.end());
  plan.train_steps = static_cast<int64_t>(plan.phases[0].steps.size());
  return plan;
}

std::vector<std::string> worst_case_sets(const WorstCasePlan& plan, const WorstCaseData& d) {
  std::vector<std::string> sets;
  if (d.synthetic)
    sets.push_back("data.lengths=longest");
  if (!plan.train_order.empty())
    sets.push_back("data.train_order=" + order_text(plan.train_order));
  if (!plan.evaluate_order.empty())
    sets.push_back("data.evaluate_order=" + order_text(plan.evaluate_order));
  return sets;
}

nlohmann::json worst_case_json(
    const WorstCasePlan& plan,
    const WorstCaseData& d,
    uint64_t seed,
    const std::string& data_source,
    const std::string& reproduce,
    bool reserved_figures) {
  nlohmann::json phases = nlohmann::json::array();
  bool attained = true;
  for (const WorstCasePhase& p : plan.phases) {
    attained = attained && p.attained;
    phases.push_back(
        {{"name", p.name},
         {"steps_run",
          p.name == "generate" ? p.steps_configured : static_cast<int64_t>(p.steps.size())},
         {"steps_configured", p.steps_configured},
         {"attained", p.attained},
         {"how", p.how},
         {"steps", steps_json(p, d)}});
  }
  nlohmann::json doc = {
      {"seed", d.synthetic ? nlohmann::json(seed) : nlohmann::json(nullptr)},
      {"inputs", data_source},
      {"assumption",
       "the bytes a step allocates depend only on its shapes (batch, positions, generation "
       "length), never on token values, and do not shrink as a shape grows; the same "
       "run.threads and LibTorch build"},
      {"allocated",
       std::string("each phase's peak_allocated_bytes is an upper bound on every seed's and "
                   "data order's under the assumption") +
           (attained ? ", attained by the inputs named (reproduce)"
                     : "; a phase with attained false is above what any data order reaches")},
      {"reserved",
       reserved_figures
           ? nlohmann::json(
                 "peak_reserved_bytes is the reserved peak of these inputs in the order run: "
                 "not a bound, since another order of the shapes (pool history) can raise it")
           : nlohmann::json(nullptr)},
      {"phases", phases},
      {"reproduce", reproduce}};
  return doc;
}

}  // namespace oomguard::app
