#include "harness/run/config.h"

#include "harness/memory/built_torch.h"
#include <oomguard/sim/alloc_conf.h>
#include <oomguard/memory/sizes.h>

namespace oomguard::run {
namespace {

// Budgets: the peaks measured on the default run (train 27.18MiB with gradient checkpointing,
// evaluate 17.47MiB, generate 13.27MiB; 2-core x86-64, LibTorch 2.15, fp32, peaks include the
// model and optimizer) plus 25% headroom, rounded up to whole MiB. Peaks are in README.md.
constexpr const char* kDefault = R"({
  "model": {"d_model": 128, "layers": 4, "heads": 4, "mlp_ratio": 4, "dropout": 0.1,
            "attention_dropout": 0.0,
            "max_seq_len": 1024},
  "data": {"file": "", "samples": 512, "max_length": 128, "batch_size": 8,
           "long_tail_fraction": 0.03, "long_tail_factor": 6.0, "sample_lengths": [],
           "train_order": [], "evaluate_order": []},
  "train": {"steps": 30, "lr": 0.003, "weight_decay": 0.01, "grad_clip": 1.0,
            "precision": "fp32"},
  "evaluate": {"batches": 8},
  "generate": {"prompts": 4, "prompt_length": 32, "max_new_tokens": 64, "greedy": true,
               "temperature": 1.0, "cache": "static", "stop_at_eos": false},
  "budget": {"train": "34MiB", "evaluate": "22MiB", "generate": "17MiB"},
  "guards": {"no_grad_eval": true, "truncate": true, "max_new_tokens": true, "kv_cap": true,
             "grad_checkpoint": true, "empty_cache": true},
  "memory": {"alloc_conf": ""},
  "run": {"threads": 0}
})";

std::string type_name(const nlohmann::json& j) {
  if (j.is_number_integer())
    return "integer";
  if (j.is_number())
    return "number";
  return j.type_name();
}

void overlay(nlohmann::json& base, const nlohmann::json& over, const std::string& prefix) {
  if (!over.is_object()) {
    throw ConfigError(
        "config" + (prefix.empty() ? "" : " key " + prefix) + ": expected an object, got " +
        type_name(over));
  }
  for (const auto& [key, value] : over.items()) {
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (!base.contains(key)) {
      std::string allowed;
      for (const auto& [k, v] : base.items())
        allowed += (allowed.empty() ? "" : ", ") + k;
      throw ConfigError("config key " + path + ": unknown; allowed here: " + allowed);
    }
    nlohmann::json& slot = base[key];
    if (slot.is_object()) {
      overlay(slot, value, path);
      continue;
    }
    const bool ok = (slot.is_number_integer() && value.is_number_integer()) ||
                    (slot.is_number_float() && value.is_number()) || (slot.type() == value.type());
    if (!ok) {
      throw ConfigError(
          "config key " + path + ": expected " + type_name(slot) + ", got " + type_name(value) +
          " " + value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    slot = value;
  }
}

class Reader {
 public:
  explicit Reader(const nlohmann::json& doc) : doc_(doc) {}
  int64_t integer(const char* section, const char* key, int64_t lo, int64_t hi) const {
    const int64_t v = at(section, key).get<int64_t>();
    if (v < lo || v > hi) {
      range_error(section, key, std::to_string(v), std::to_string(lo), std::to_string(hi));
    }
    return v;
  }
  double number(const char* section, const char* key, double lo, double hi) const {
    const double v = at(section, key).get<double>();
    if (!(v >= lo && v <= hi)) {
      range_error(section, key, std::to_string(v), std::to_string(lo), std::to_string(hi));
    }
    return v;
  }
  int64_t size(const char* section, const char* key) const {
    try {
      const int64_t v = memory::parse_size(at(section, key).get<std::string>());
      if (v <= 0)
        throw std::invalid_argument("must be positive");
      return v;
    } catch (const std::invalid_argument& e) {
      throw ConfigError(std::string("config key ") + section + "." + key + ": " + e.what());
    }
  }
  const nlohmann::json& at(const char* section, const char* key) const {
    return doc_.at(section).at(key);
  }
  // A list of sample indices (data.train_order); each checked against the samples when they
  // are known (app::resolve_run, the loader).
  std::vector<size_t> indices(const char* section, const char* key) const {
    std::vector<size_t> out;
    for (const nlohmann::json& v : at(section, key)) {
      if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        throw ConfigError(
            std::string("config key ") + section + "." + key + ": " + v.dump() +
            " is not a sample index; expected integers from 0");
      out.push_back(v.get<size_t>());
    }
    return out;
  }

 private:
  [[noreturn]] static void range_error(
      const char* section,
      const char* key,
      const std::string& v,
      const std::string& lo,
      const std::string& hi) {
    throw ConfigError(
        std::string("config key ") + section + "." + key + ": " + v + " is out of range; allowed " +
        lo + " .. " + hi);
  }
  const nlohmann::json& doc_;
};

// data.sample_lengths: [sample, bytes] pairs, each a length the generator can draw.
// train.precision: fp32, fp16-amp or bf16-amp.
phases::Precision precision(const std::string& name) {
  const auto parsed = phases::parse_precision(name);
  if (!parsed)
    throw ConfigError(
        "config key train.precision: \"" + name +
        "\" is not allowed; use fp32, fp16-amp (CUDA autocast at fp16 with loss scaling) or "
        "bf16-amp");
  return *parsed;
}

std::vector<std::pair<size_t, int64_t>> sample_lengths(
    const nlohmann::json& list, const data::CorpusConfig& corpus) {
  std::vector<std::pair<size_t, int64_t>> out;
  for (const nlohmann::json& pair : list) {
    std::string ranges;
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_unsigned() ||
        !pair[1].is_number_unsigned())
      throw ConfigError(
          "config key data.sample_lengths: " + pair.dump() +
          " is not a pair [sample, bytes] of integers from 0");
    const auto bytes = pair[1].get<int64_t>();
    if (!data::drawable_length(corpus, bytes, &ranges))
      throw ConfigError(
          "config key data.sample_lengths: " + pair.dump() + ": the generator draws " + ranges +
          " for these data.max_length and data.long_tail_*, not " + std::to_string(bytes));
    out.emplace_back(pair[0].get<size_t>(), bytes);
  }
  return out;
}

}  // namespace

const nlohmann::json& default_config() {
  static const nlohmann::json doc = nlohmann::json::parse(kDefault);
  return doc;
}

void apply_set(nlohmann::json& doc, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError("--set " + assignment + ": expected key.path=value");
  }
  try {
    (void)nlohmann::json(assignment).dump();  // reports and messages print keys and values
  } catch (const nlohmann::json::type_error&) {
    throw ConfigError("--set: the assignment is not UTF-8 text");
  }
  const std::string path = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    value = text;
  }
  nlohmann::json* node = &doc;
  size_t start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    const std::string key = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (key.empty()) {
      throw ConfigError("--set " + assignment + ": empty key in " + path);
    }
    if (!node->is_object() && !node->is_null()) {  // an earlier --set gave it a value
      throw ConfigError(
          "--set " + assignment + ": " + path.substr(0, start - 1) +
          " is set to a value, so it has no key " + key);
    }
    if (dot == std::string::npos) {
      (*node)[key] = value;
      return;
    }
    node = &(*node)[key];
    start = dot + 1;
  }
}

void check_sample_indices(const RunConfig& c, size_t samples) {
  const std::vector<size_t> lengthened = [&] {
    std::vector<size_t> out;
    for (const auto& [i, bytes] : c.corpus.sample_lengths)
      out.push_back(i);
    return out;
  }();
  const std::string source =
      c.data_file.empty() ? "data.samples is " : "data file " + c.data_file + " holds ";
  for (const auto& [key, list] :
       {std::pair{"sample_lengths", &lengthened},
        std::pair{"train_order", &c.train_order},
        std::pair{"evaluate_order", &c.evaluate_order}})
    for (const size_t i : *list)
      if (i >= samples)
        throw ConfigError(
            std::string("config key data.") + key + ": sample " + std::to_string(i) + ", but " +
            source + std::to_string(samples) + " (samples 0 .. " + std::to_string(samples - 1) +
            ")");
}

void disable_guard(nlohmann::json& doc, const std::string& name) {
  std::string known;
  bool found = false;
  for (const GuardInfo& g : guard_table()) {
    if (name == "all" || name == g.name) {
      found = true;
      apply_set(doc, std::string("guards.") + g.name + "=false");
    }
    known += std::string(known.empty() ? "" : ", ") + g.name;
  }
  if (!found) {
    throw ConfigError("--disable-guard " + name + ": unknown guard; known: " + known + ", all");
  }
}

RunConfig load_config(const nlohmann::json& overrides) {
  nlohmann::json doc = default_config();
  overlay(doc, overrides, "");
  const Reader r(doc);
  RunConfig c;
  c.model.d_model = r.integer("model", "d_model", 8, 8192);
  c.model.layers = r.integer("model", "layers", 1, 256);
  c.model.heads = r.integer("model", "heads", 1, 256);
  c.model.mlp_ratio = r.integer("model", "mlp_ratio", 1, 16);
  c.model.dropout = r.number("model", "dropout", 0.0, 0.9);
  c.model.attention_dropout = r.number("model", "attention_dropout", 0.0, 0.9);
  c.model.max_seq_len = r.integer("model", "max_seq_len", 2, 65536);
  if (c.model.d_model % c.model.heads != 0) {
    throw ConfigError(
        "config key model.heads: " + std::to_string(c.model.heads) +
        " does not divide model.d_model " + std::to_string(c.model.d_model));
  }
  c.data_file = r.at("data", "file").get<std::string>();
  c.corpus.num_samples = r.integer("data", "samples", 1, 10'000'000);
  c.max_length = r.integer("data", "max_length", 2, c.model.max_seq_len);
  c.corpus.max_length = c.max_length;
  c.batch_size = r.integer("data", "batch_size", 1, 4096);
  c.corpus.long_tail_fraction = r.number("data", "long_tail_fraction", 0.0, 1.0);
  c.corpus.long_tail_factor = r.number("data", "long_tail_factor", 2.0, 64.0);
  c.corpus.sample_lengths = sample_lengths(r.at("data", "sample_lengths"), c.corpus);
  if (!c.corpus.sample_lengths.empty() && !c.data_file.empty())
    throw ConfigError(
        "config key data.sample_lengths: it sets lengths in the synthetic corpus, and "
        "data.file " +
        c.data_file + " is given; drop one");
  c.train_order = r.indices("data", "train_order");
  c.evaluate_order = r.indices("data", "evaluate_order");
  if (c.data_file.empty())  // a data file's samples are counted when it is read
    check_sample_indices(c, static_cast<size_t>(c.corpus.num_samples));
  c.train.steps = r.integer("train", "steps", 0, 1'000'000);
  c.train.lr = r.number("train", "lr", 1e-8, 10.0);
  c.train.weight_decay = r.number("train", "weight_decay", 0.0, 10.0);
  c.train.grad_clip = r.number("train", "grad_clip", 1e-6, 1e6);
  c.train.precision = precision(r.at("train", "precision").get<std::string>());
  c.evaluate.batches = r.integer("evaluate", "batches", 0, 1'000'000);
  c.generate.prompts = r.integer("generate", "prompts", 1, 4096);
  c.generate.prompt_length = r.integer("generate", "prompt_length", 1, c.model.max_seq_len - 1);
  c.generate.max_new_tokens =
      r.integer("generate", "max_new_tokens", 1, c.model.max_seq_len - c.generate.prompt_length);
  c.generate.greedy = r.at("generate", "greedy").get<bool>();
  c.generate.temperature = r.number("generate", "temperature", 1e-3, 100.0);
  c.generate.stop_at_eos = r.at("generate", "stop_at_eos").get<bool>();
  c.budgets.train = r.size("budget", "train");
  c.budgets.evaluate = r.size("budget", "evaluate");
  c.budgets.generate = r.size("budget", "generate");
  for (const GuardInfo& g : guard_table()) {
    c.guards.*g.flag = r.at("guards", g.name).get<bool>();
  }
  c.model.checkpoint_blocks = c.guards.grad_checkpoint;
  // The kv_cap guard off turns the static cache into one that grows by cat.
  const std::string cache = r.at("generate", "cache").get<std::string>();
  if (cache == "static" || (cache == "grow" && !c.guards.kv_cap)) {
    c.generate.cache = c.guards.kv_cap ? models::CacheMode::kStatic : models::CacheMode::kGrow;
  } else if (cache == "none") {
    c.generate.cache = models::CacheMode::kNone;
  } else {
    throw ConfigError(
        "config key generate.cache: \"" + cache + "\" is not allowed; use static or none (grow " +
        "is what the kv_cap guard forbids: add --disable-guard kv_cap)");
  }
  c.threads = r.integer("run", "threads", 0, 1024);
  c.alloc_conf = r.at("memory", "alloc_conf").get<std::string>();
  try {
    sim::validate_alloc_conf(c.alloc_conf, memory::built_torch_version());
  } catch (const std::invalid_argument& e) {
    throw ConfigError(std::string("config key ") + e.what());
  }
  c.resolved = doc;
  return c;
}

}  // namespace oomguard::run
