// Fuzz target: the config parser. Input starting with '{' is a config file; anything else is
// one --set assignment per line (then "-guard" lines disable guards). The only way out other
// than a valid config is run::ConfigError, which the CLI turns into exit 2 with its message;
// a config that loads keeps the invariants the phases rely on.
#include <sstream>
#include <string>

#include "harness/run/config.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oomguard;
  const std::string text(reinterpret_cast<const char*>(data), size);
  nlohmann::json doc = nlohmann::json::object();
  try {
    if (!text.empty() && text[0] == '{') {
      doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (doc.is_discarded())
        return 0;  // the CLI rejects it before the parser sees it
    } else {
      std::istringstream lines(text);
      for (std::string line; std::getline(lines, line);) {
        if (line.rfind("-guard ", 0) == 0)
          run::disable_guard(doc, line.substr(7));
        else
          run::apply_set(doc, line);
      }
    }
    const run::RunConfig c = run::load_config(doc);
    fuzz::require(
        c.model.heads > 0 && c.model.d_model % c.model.heads == 0, "heads divide d_model");
    fuzz::require(c.max_length >= 2 && c.max_length <= c.model.max_seq_len, "max_length in range");
    fuzz::require(c.batch_size > 0, "batch_size positive");
    fuzz::require(
        c.budgets.train > 0 && c.budgets.evaluate > 0 && c.budgets.generate > 0,
        "budgets positive");
  } catch (const run::ConfigError&) {
  }
  return 0;
}
