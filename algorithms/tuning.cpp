// SPDX-License-Identifier: BSD-3-Clause
#include "algorithms/tuning.h"

#include <cstdlib>
#include <limits>

#include "support/config.h"
#include "support/log.h"

namespace veneer::algorithms {
namespace {

constexpr int64_t infinity = std::numeric_limits<int64_t>::max();

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits on `sep`, keeping empty pieces (so "a,,b" is an error upstream).
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    size_t at = s.find(sep);
    parts.push_back(trim(s.substr(0, at)));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

// "\"what\": why", built by appending (GCC 12 warns falsely on + chains here).
std::string complaint(std::string_view what, std::string_view why) {
  std::string m;
  m.reserve(what.size() + why.size() + 4);
  m += '"';
  m += what;
  m += "\": ";
  m += why;
  return m;
}

// "4k-8k" without a choice: a range, not a bare choice.
bool parse_rules_bare_range_is_size(std::string_view item) {
  return !item.empty() && (item.front() >= '0' && item.front() <= '9');
}

}  // namespace

bool Rule::covers(int64_t bytes) const { return bytes >= lo && (bytes < hi || hi == infinity); }

std::optional<std::vector<Rule>> parse_rules(Collective c, std::string_view text, std::string* error) {
  auto fail = [&](std::string why) -> std::optional<std::vector<Rule>> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  std::vector<Rule> rules;
  if (trim(text).empty()) return rules;
  for (std::string_view item : split(text, ',')) {
    size_t colon = item.find(':');
    // A bare choice ("ring", "auto", "library", "a|b") covers every size.
    std::string_view range = colon == std::string_view::npos ? std::string_view("0-inf") : trim(item.substr(0, colon));
    std::string_view choice = colon == std::string_view::npos ? item : trim(item.substr(colon + 1));
    if (colon == std::string_view::npos && parse_rules_bare_range_is_size(item))
      return fail(complaint(item, "expected lo-hi:choice or a choice"));
    size_t dash = range.find('-');
    if (dash == std::string_view::npos) return fail(complaint(range, "expected lo-hi"));
    auto lo = parse_size(trim(range.substr(0, dash)));
    auto hi = parse_size(trim(range.substr(dash + 1)));
    if (!lo || !hi || *lo > *hi) return fail(complaint(range, "bad size range"));
    Rule rule;
    rule.lo = *lo;
    rule.hi = *hi;
    rule.text = colon == std::string_view::npos ? "0-inf:" + std::string(item) : std::string(item);
    if (choice != "auto") {
      for (std::string_view name : split(choice, '|')) {
        if (name != "library" && !find_algorithm(c, name))
          return fail(complaint(name, "not an algorithm of this collective"));
        rule.choices.emplace_back(name);
      }
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

std::string_view default_rules(Collective c) {
  // Until a calibrated profile says otherwise, the cost model decides
  // everywhere, except where a formula is known to flatter an algorithm:
  // Bruck's alltoall copies every block log2(p) times, which the model
  // undercounts for large blocks.
  switch (c) {
    case Collective::allreduce:
    case Collective::bcast:
    case Collective::reduce:
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::reduce_scatter_block: return "0-inf:auto";
    case Collective::alltoall: return "0-64k:auto,64k-inf:library|pairwise|node_aware";
  }
  return "0-inf:auto";
}

std::string_view override_variable(Collective c) {
  switch (c) {
    case Collective::allreduce: return "VENEER_ALLREDUCE";
    case Collective::bcast: return "VENEER_BCAST";
    case Collective::reduce: return "VENEER_REDUCE";
    case Collective::allgather: return "VENEER_ALLGATHER";
    case Collective::reduce_scatter: return "VENEER_REDUCE_SCATTER";
    case Collective::reduce_scatter_block: return "VENEER_REDUCE_SCATTER_BLOCK";
    case Collective::alltoall: return "VENEER_ALLTOALL";
  }
  return "";
}

const Rule* Tuning::rule_for(Collective c, int64_t bytes, bool* from_user) const {
  const size_t i = static_cast<size_t>(c);
  for (const Rule& r : user[i])
    if (r.covers(bytes)) {
      if (from_user) *from_user = true;
      return &r;
    }
  if (from_user) *from_user = false;
  for (const Rule& r : defaults[i])
    if (r.covers(bytes)) return &r;
  return nullptr;
}

Tuning Tuning::from_env() {
  Tuning t;
  for (int i = 0; i < collective_count; ++i) {
    const Collective c = static_cast<Collective>(i);
    std::string error;
    auto defaults = parse_rules(c, default_rules(c), &error);
    if (defaults) t.defaults[i] = std::move(*defaults);
    else log(LogLevel::error, "built-in %s rules: %s", std::string(collective_name(c)).c_str(), error.c_str());
    std::string variable(override_variable(c));
    const char* text = std::getenv(variable.c_str());
    // Reduce_scatter_block follows VENEER_REDUCE_SCATTER unless it has its own.
    if (!text && c == Collective::reduce_scatter_block) text = std::getenv("VENEER_REDUCE_SCATTER");
    if (!text) continue;
    auto user = parse_rules(c, text, &error);
    if (user) t.user[i] = std::move(*user);
    else log(LogLevel::warn, "%s=\"%s\" ignored: %s", variable.c_str(), text, error.c_str());
  }
  return t;
}

}  // namespace veneer::algorithms
