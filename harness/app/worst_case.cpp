#include "harness/app/worst_case.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <stdexcept>

#include "data/order.h"

namespace oomguard::app {
namespace {

// Train batches led by long samples of graded lengths, for the order search (plan_train).
constexpr size_t kLadderRungs = 6;

// The positions of a batch whose longest sample has `length` bytes (data::collate).
int64_t positions_of(int64_t length, const WorstCaseData& d) {
  if (!d.pad_to_longest)
    return d.cut;
  return std::max<int64_t>(1, std::min(length, d.cut));
}

// Plans one run: the lengths of its inputs and the orders of its loaders, changed as little
// as the worst case needs.
class Planner {
 public:
  explicit Planner(const WorstCaseData& d) : d_(d), lengths_(d.lengths) {
    ranked_.resize(lengths_.size());
    std::iota(ranked_.begin(), ranked_.end(), size_t{0});
    std::stable_sort(ranked_.begin(), ranked_.end(), [&](size_t a, size_t b) {
      return positions_of(lengths_[a], d_) > positions_of(lengths_[b], d_);
    });
  }

  // Batch `k` of `draws` holds a sample of the most positions: on the synthetic corpus its
  // first sample is drawn longest; from a data file the `rank`-th longest sample is swapped
  // in from its place in the same epoch, so that each sample still comes once per epoch.
  void lead(std::vector<size_t>& draws, size_t k, size_t rank, int64_t bytes = -1) {
    const auto B = static_cast<size_t>(d_.batch_size);
    const size_t q = k * B;
    if (d_.synthetic) {
      // A sample of the batch that the seed's train batches do not hold where there is one,
      // so that they keep the seed's shapes.
      size_t pick = q;
      for (size_t j = q; j < q + B && j < draws.size(); ++j)
        if (spoken_for_.count(draws[j]) == 0) {
          pick = j;
          break;
        }
      lengthen(draws[pick], bytes);
      return;
    }
    const size_t sample = ranked_[rank % ranked_.size()];
    const size_t n = lengths_.size();
    const size_t from = q / n * n, to = std::min(from + n, draws.size());
    const auto it = std::find(
        draws.begin() + static_cast<std::ptrdiff_t>(from),
        draws.begin() + static_cast<std::ptrdiff_t>(to),
        sample);
    if (it != draws.begin() + static_cast<std::ptrdiff_t>(to))
      std::swap(*it, draws[q]);
    else
      draws[q] = sample;  // its place in the epoch lies past the draws
  }

  void lengthen(size_t sample, int64_t bytes = -1) {
    lengths_[sample] = bytes < 0 ? d_.longest_length : bytes;
    given_[sample] = lengths_[sample];
  }

  WorstCaseStep step(std::vector<size_t> samples) const {
    WorstCaseStep s;
    s.positions = batch_positions(samples, lengths_, d_);
    s.samples = std::move(samples);
    return s;
  }

  // The batches of `draws`, the first `count` of them.
  std::vector<WorstCaseStep> batches(const std::vector<size_t>& draws, size_t count) const {
    std::vector<WorstCaseStep> out;
    const auto B = static_cast<size_t>(d_.batch_size);
    for (size_t k = 0; k < count && (k + 1) * B <= draws.size(); ++k)
      out.push_back(step(
          {draws.begin() + static_cast<std::ptrdiff_t>(k * B),
           draws.begin() + static_cast<std::ptrdiff_t>((k + 1) * B)}));
    return out;
  }

  // Samples the run draws elsewhere: lengthening them changes other steps' shapes too.
  void speak_for(const std::vector<size_t>& samples) {
    spoken_for_.insert(samples.begin(), samples.end());
  }

  bool spoken_for(size_t sample) const { return spoken_for_.count(sample) > 0; }
  const std::vector<size_t>& ranked() const { return ranked_; }
  const std::vector<int64_t>& lengths() const { return lengths_; }
  std::vector<std::pair<size_t, int64_t>> given() const { return {given_.begin(), given_.end()}; }

 private:
  const WorstCaseData& d_;
  std::vector<int64_t> lengths_;
  std::vector<size_t> ranked_;       // sample indices, the most positions first; ties in data order
  std::map<size_t, int64_t> given_;  // synthetic: the lengths the plan set
  std::set<size_t> spoken_for_;
};

// Train, with the reserved peak searched: the seed's own batches, then a batch holding the
// longest sample and, on the synthetic corpus, batches led by long samples of lengths from
// the long tail's shortest to its longest (a ladder): the orders searched then hold the
// seed's shapes and shapes of every size the generator draws. Without a search: the seed's
// first batch, then the longest sample's (AdamW's state exists from the first step's end).
WorstCasePhase plan_train(
    Planner& planner, const WorstCaseData& d, WorstCasePlan& plan, std::vector<size_t>& draws) {
  WorstCasePhase phase{"train", {}, d.train_steps, true, ""};
  if (d.train_steps == 0)
    return phase;
  const auto B = static_cast<size_t>(d.batch_size);
  const auto S = static_cast<size_t>(d.train_steps);
  // The seed's batches kept before the longest sample's.
  const size_t kept = d.every_train_step ? S : std::min<size_t>(S - 1, 1);
  const size_t rungs =
      d.synthetic && d.every_train_step && d.shortest_long_length > 0 ? kLadderRungs : 0;
  const size_t run = kept + 1 + rungs;
  draws = data::seeded_draws(d.lengths.size(), d.seed, run * B);
  planner.speak_for({draws.begin(), draws.begin() + static_cast<std::ptrdiff_t>(kept * B)});
  planner.lead(draws, kept, 0);
  for (size_t r = 0; r < rungs; ++r)
    planner.lead(
        draws,
        kept + 1 + r,
        0,
        d.shortest_long_length + (d.longest_length - d.shortest_long_length) *
                                     static_cast<int64_t>(r) / static_cast<int64_t>(rungs));
  if (!d.synthetic)
    plan.train_order = draws;
  plan.train_steps = static_cast<int64_t>(run);
  plan.train_steps_searched = d.every_train_step ? d.train_steps : 0;
  phase.how =
      d.every_train_step
          ? "the seed's " + std::to_string(S) + " batches, then one holding the longest sample" +
                (rungs > 0
                     ? " and " + std::to_string(rungs) + " led by long samples of graded lengths"
                     : "") +
                ": the allocated peak is the longest's step (AdamW's state exists); the reserved "
                "peak is searched over sequences of " +
                std::to_string(S) + " of these steps"
          : "the seed's first batch, then one holding the longest sample, after AdamW's state "
            "exists: the highest any step reaches; later steps repeat its shapes, so 2 steps run";
  return phase;
}

WorstCasePhase plan_evaluate(Planner& planner, const WorstCaseData& d, WorstCasePlan& plan) {
  WorstCasePhase phase{"evaluate", {}, d.evaluate_batches, true, ""};
  const auto m = static_cast<size_t>(d.evaluate_batches);
  const auto B = static_cast<size_t>(d.batch_size);
  const size_t n = d.lengths.size();
  if (m == 0)
    return phase;
  std::vector<size_t> draws = data::seeded_draws(n, d.seed + 1, m * B);
  if (d.synthetic || m * B <= n) {
    // Batch k led by the (m - k)-th longest: the longest last, its transient on top of all.
    for (size_t k = m; k-- > 0;)
      planner.lead(draws, k, m - 1 - k);
    phase.how = d.synthetic ? "the seed's batches, each led by a longest sample"
                            : "within one epoch each sample comes once: the seed's batches with "
                              "batch k led by the (" +
                                  std::to_string(m) + " - k)-th longest sample, the longest last";
  } else {
    // Past one epoch: every batch led by a sample of the most positions, which may repeat.
    const auto& ranked = planner.ranked();
    const auto top = [&](size_t i) { return positions_of(planner.lengths()[ranked[i]], d); };
    size_t tops = 0;
    while (tops < n && top(tops) == top(0))
      ++tops;
    for (size_t k = 0; k < m; ++k)
      draws[k * B] = ranked[k % tops];
    phase.attained = tops >= std::min(m, (n - 1) / B + 2);
    phase.how = "the evaluation spans more than one epoch (" + std::to_string(m) + " batches of " +
                std::to_string(B) + ", " + std::to_string(n) +
                " samples): every batch led by a sample of the most positions" +
                (phase.attained ? ""
                                : ", which no data order may reach with " + std::to_string(tops) +
                                      " such sample(s)");
  }
  if (!d.synthetic)
    plan.evaluate_order = draws;
  phase.steps = planner.batches(draws, m);
  return phase;
}

WorstCasePhase plan_generate(Planner& planner, const WorstCaseData& d) {
  WorstCasePhase phase{"generate", {}, 0, true, ""};
  const auto& lengths = planner.lengths();
  const auto find_sources = [&] {
    std::vector<size_t> found;
    for (size_t i = 0; i < lengths.size() && static_cast<int64_t>(found.size()) < d.prompts; ++i)
      if (lengths[i] >= d.prompt_length)
        found.push_back(i);
    return found;
  };
  std::vector<size_t> sources = find_sources();
  // Unguarded, generation runs until its longest source would end, so one source drawn
  // longest is the worst: one the other phases do not draw where there is one.
  if (d.synthetic && !d.cap_new_tokens && !sources.empty()) {
    size_t pick = sources.front();
    for (const size_t i : sources)
      if (!planner.spoken_for(i)) {
        pick = i;
        break;
      }
    planner.lengthen(pick);
  }
  int64_t longest = 0;
  for (const size_t i : sources)
    longest = std::max(longest, lengths[i]);
  // As phases::generate: its sources' tokens are their bytes and an end token.
  const int64_t new_tokens =
      d.cap_new_tokens
          ? d.max_new_tokens
          : std::clamp(longest + 1 - d.prompt_length, int64_t{1}, d.max_seq_len - d.prompt_length);
  phase.steps_configured = new_tokens;
  phase.steps.push_back({sources, d.prompt_length + new_tokens});
  phase.how = d.synthetic ? "its prompts' sources are the corpus's first samples, one drawn longest"
                          : "the data file's own prompts: the first samples long enough, in "
                            "file order, whatever the seed";
  if (!d.cap_new_tokens)
    phase.how += "; unguarded, generating until the longest of them would end";
  return phase;
}

nlohmann::json steps_json(const WorstCasePhase& phase, const std::vector<int64_t>& lengths) {
  nlohmann::json steps = nlohmann::json::array();
  for (const WorstCaseStep& s : phase.steps) {
    nlohmann::json sample_lengths = nlohmann::json::array();
    for (const size_t i : s.samples)
      sample_lengths.push_back(lengths[i]);
    steps.push_back(
        {{"samples", s.samples}, {"lengths", sample_lengths}, {"positions", s.positions}});
  }
  return steps;
}

// The samples of `phase`'s steps in `order` (all of them in their own order without one).
std::vector<size_t> samples_in(const WorstCasePhase& phase, const std::vector<size_t>* order) {
  std::vector<size_t> out;
  const size_t places = order != nullptr ? order->size() : phase.steps.size();
  for (size_t p = 0; p < places; ++p) {
    const WorstCaseStep& s = phase.steps[order != nullptr ? (*order)[p] : p];
    out.insert(out.end(), s.samples.begin(), s.samples.end());
  }
  return out;
}

}  // namespace

int64_t batch_positions(
    const std::vector<size_t>& samples,
    const std::vector<int64_t>& lengths,
    const WorstCaseData& d) {
  int64_t longest = 0;
  for (const size_t i : samples)
    longest = std::max(longest, lengths.at(i));
  return positions_of(longest, d);
}

WorstCasePlan plan_worst_case(const WorstCaseData& d) {
  if (d.lengths.empty())
    throw std::invalid_argument("worst case: no samples");
  Planner planner(d);
  WorstCasePlan plan;
  std::vector<size_t> train_draws;
  WorstCasePhase train = plan_train(planner, d, plan, train_draws);
  WorstCasePhase evaluate = plan_evaluate(planner, d, plan);
  WorstCasePhase generate = plan_generate(planner, d);
  // Train's batches are listed once every sample that the plan lengthens is.
  train.steps = planner.batches(train_draws, static_cast<size_t>(plan.train_steps));
  plan.phases = {std::move(train), std::move(evaluate), std::move(generate)};
  plan.lengths = planner.lengths();
  plan.sample_lengths = planner.given();
  return plan;
}

std::vector<std::string> worst_case_sets(
    const WorstCasePlan& plan,
    const std::vector<size_t>* train,
    const std::vector<size_t>* evaluate) {
  std::vector<std::string> sets;
  const auto list = [](const std::vector<size_t>& v) { return nlohmann::json(v).dump(); };
  if (!plan.sample_lengths.empty())
    sets.push_back("data.sample_lengths=" + nlohmann::json(plan.sample_lengths).dump());
  if (!plan.train_order.empty() || train != nullptr)
    sets.push_back("data.train_order=" + list(samples_in(plan.phases[0], train)));
  // The worst-case run's extra steps (the longest sample's after the seed's) run in a plain
  // run that takes as many.
  if (train == nullptr && plan.train_steps > plan.phases[0].steps_configured)
    sets.push_back("train.steps=" + std::to_string(plan.train_steps));
  if (!plan.evaluate_order.empty() || evaluate != nullptr)
    sets.push_back("data.evaluate_order=" + list(samples_in(plan.phases[1], evaluate)));
  return sets;
}

nlohmann::json worst_case_json(
    const WorstCasePlan& plan,
    const WorstCaseData& d,
    const std::string& data_source,
    const std::string& reproduce,
    const nlohmann::json& reserved) {
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
         {"steps", steps_json(p, plan.lengths)}});
  }
  return {
      {"seed", d.synthetic ? nlohmann::json(d.seed) : nlohmann::json(nullptr)},
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
      {"reserved", reserved},
      {"phases", phases},
      {"reproduce", reproduce}};
}

nlohmann::json reserved_json(
    const sim::StepOrderSearch* search,
    const std::string& reproduce_highest,
    const std::string& why_not) {
  if (search == nullptr || !search->refused.empty())
    return {
        {"searched", false},
        {"what",
         "peak_reserved_bytes is the reserved peak of these inputs in the order run: not a "
         "bound, since another order of the shapes (pool history) can raise it"},
        {"why_not", search != nullptr ? search->refused : why_not}};
  const auto order_json = [](const sim::OrderFigures& f) {
    nlohmann::json phases = nlohmann::json::object();
    for (const auto& p : f.result.phases)
      phases[p.name] = p.peak_reserved_bytes;
    return nlohmann::json{
        {"how", f.how == "recorded" ? "the run's own" : f.how},
        {"phases_reserved_bytes", phases},
        {"train_steps", f.order.at(0)},
        {"evaluate_steps", f.order.at(1)},
        {"peak_reserved_bytes", f.result.peak_reserved_bytes},
        {"oom",
         f.result.oom ? nlohmann::json(f.result.oom->info.message) : nlohmann::json(nullptr)}};
  };
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& p : search->phases)
    phases.push_back(
        {{"name", p.name}, {"lowest_bytes", p.lowest_bytes}, {"highest_bytes", p.highest_bytes}});
  return {
      {"searched", true},
      {"what",
       "each phase's peak_reserved_bytes is the highest of the sequences of a plain run's "
       "steps tried (the seed's own among them): the allocated peaks are proven bounds, the "
       "reserved peak is the "
       "highest the search found, a lower bound on the true worst, checked against seeds; "
       "orders are replayed with the cublas_workspace rule, not sdpa_attention, and keep the "
       "CPU kernels' scratch that cpu_scratch leaves out, so where the run applies those a "
       "replayed figure may differ from a run of that order"},
      {"orders_tried", search->orders_tried},
      {"lowest_bytes", search->lowest.result.peak_reserved_bytes},
      {"highest_bytes", search->highest.result.peak_reserved_bytes},
      {"phases", phases},
      {"own", order_json(search->recorded)},
      {"highest", order_json(search->highest)},
      {"reproduce_highest", reproduce_highest}};
}

}  // namespace oomguard::app
