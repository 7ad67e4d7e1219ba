#pragma once
// A comparison as people and programs read it: a console table, a Markdown table for a
// GitHub step summary or pull-request comment, and the JSON report oomguard.compare/1
// (harness/schemas/compare.schema.json) with its one reader. No Torch.
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/compare/compare.h"

namespace oomguard::compare {

// The first line of the Markdown: how a workflow finds its own comment to update.
constexpr const char* kMarkdownMarker = "<!-- oomguard-memory-diff -->";

// "+64MiB", "-1.5KiB", "0B".
std::string signed_size(int64_t bytes);

// The console table: the changes, largest first, then what is over its limit and the verdict
// ("no change" when nothing differs).
std::string render_text(const Comparison& c);

// The marker, a heading, the verdict, the `shown` largest changes as a table and the rest
// folded in a <details> block, tests on one side only, and what the sides were measured under.
std::string render_markdown(const Comparison& c, size_t shown = 10);

// oomguard.compare/1.
nlohmann::json to_json(const Comparison& c);
// Reads what to_json wrote. Throws InputError naming `source` for anything else.
Comparison from_json(const nlohmann::json& doc, const std::string& source);

}  // namespace oomguard::compare
