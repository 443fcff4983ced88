// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// Tuning rules: which algorithms may run for which message sizes, in one
// small language shared by the built-in defaults and the user's overrides
// (VENEER_ALLREDUCE, VENEER_BCAST, ...):
//
//   rules  := rule ("," rule)*
//   rule   := size "-" size ":" choice | choice  sizes in bytes, k/M/G suffixes, "inf";
//                                              a bare choice covers every size
//   choice := "auto" | name ("|" name)*         name: an algorithm or "library"
//
// A rule covers lo <= bytes < hi (hi "inf" covers everything above lo). One
// name forces that algorithm (the library if it is not eligible); several
// let the cost model choose among them; "auto" lets it choose among all,
// the library included. The first rule covering a size wins; user rules come
// before the defaults. "bytes" is the whole message: the vector for
// Allreduce, Reduce, Reduce_scatter(_block) and Bcast, the gathered result for
// Allgather, and what one rank sends in total for Alltoall.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/algorithm.h"

namespace veneer::algorithms {

struct Rule {
  int64_t lo = 0;
  int64_t hi = 0;                    // exclusive, except INT64_MAX ("inf") which covers everything
  std::vector<std::string> choices;  // empty: auto
  std::string text;                  // as written, for explain()
  bool covers(int64_t bytes) const;
};

// Parses rules for collective c; nullopt with `error` set on junk or unknown names.
std::optional<std::vector<Rule>> parse_rules(Collective c, std::string_view text, std::string* error = nullptr);

// The built-in rules for c, in the same language.
std::string_view default_rules(Collective c);
// The environment variable holding user rules for c.
std::string_view override_variable(Collective c);

// The rules in force: user overrides from the environment, then defaults.
struct Tuning {
  std::vector<Rule> user[collective_count];
  std::vector<Rule> defaults[collective_count];
  // The rule that governs a call of `bytes` (nullptr: none, i.e. auto), and whether it is the user's.
  const Rule* rule_for(Collective c, int64_t bytes, bool* from_user = nullptr) const;
  // Reads the environment; warnings for bad overrides go to the log.
  static Tuning from_env();
};

}  // namespace veneer::algorithms
