// SPDX-License-Identifier: BSD-3-Clause
#include "support/config.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <tuple>
#include <utility>

namespace veneer {

std::optional<int64_t> parse_size(std::string_view t) {
  if (t == "inf" || t == "max") return std::numeric_limits<int64_t>::max();
  if (t.empty()) return std::nullopt;
  int64_t value = 0;
  size_t i = 0;
  for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) {
    if (value > (std::numeric_limits<int64_t>::max() - 9) / 10) return std::nullopt;
    value = value * 10 + (t[i] - '0');
  }
  if (i == 0) return std::nullopt;
  int shift = 0;
  if (i < t.size()) {
    switch (t[i]) {
      case 'k':
      case 'K': shift = 10; break;
      case 'm':
      case 'M': shift = 20; break;
      case 'g':
      case 'G': shift = 30; break;
      default: return std::nullopt;
    }
    ++i;
    if (i < t.size() && (t[i] == 'i' || t[i] == 'I')) ++i;
    if (i < t.size() && (t[i] == 'b' || t[i] == 'B')) ++i;
    if (i != t.size()) return std::nullopt;
  }
  if (shift && value > (std::numeric_limits<int64_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

namespace {

bool parse_bool(const char* v, bool fallback) {
  if (!v || !*v) return fallback;
  std::string_view s(v);
  if (s == "0" || s == "off" || s == "no" || s == "false" || s == "OFF" || s == "NO" || s == "FALSE") return false;
  if (s == "1" || s == "on" || s == "yes" || s == "true" || s == "ON" || s == "YES" || s == "TRUE") return true;
  return fallback;
}

int64_t size_or(const char* v, int64_t fallback) {
  if (!v) return fallback;
  auto parsed = parse_size(v);
  return parsed ? *parsed : fallback;
}

const char* real_getenv(const char* name) { return std::getenv(name); }

}  // namespace

Config g_config = parse_config(real_getenv);

Config parse_config(const char* (*env)(const char*)) {
  Config c;
  c.enabled = !parse_bool(env("VENEER_DISABLE"), false);
  c.datatypes = parse_bool(env("VENEER_DATATYPES"), true);
  c.pack = parse_bool(env("VENEER_PACK"), true);
  c.p2p = parse_bool(env("VENEER_P2P"), true);
  c.alltoall = parse_bool(env("VENEER_ALLTOALLV"), true);
  c.collectives = parse_bool(env("VENEER_COLLECTIVES"), true);
  if (const char* l = env("VENEER_LOG")) {
    std::string_view s(l);
    if (s == "error" || s == "0") c.log_level = LogLevel::error;
    else if (s == "warn" || s == "1") c.log_level = LogLevel::warn;
    else if (s == "info" || s == "2") c.log_level = LogLevel::info;
    else if (s == "debug" || s == "3") c.log_level = LogLevel::debug;
  }
  if (const char* r = env("VENEER_REPORT")) {
    std::string_view s(r);
    c.report = (s == "2" || s == "rank") ? 2 : (parse_bool(r, false) ? 1 : 0);
  }
  if (const char* f = env("VENEER_REPORT_FILE")) c.report_file = f;
  c.collectives_quick = c.report == 0;
  // A threshold the user set (and that reads as a size) is theirs: a profile does not replace it.
  for (auto [name, value, origin] :
       {std::tuple{"VENEER_P2P_MAX_BLOCK", &c.p2p_max_block, &c.p2p_max_block_origin},
        std::tuple{"VENEER_ALLTOALL_MAX_BLOCK", &c.alltoall_max_block, &c.alltoall_max_block_origin},
        std::tuple{"VENEER_PACK_MAX_BLOCK", &c.pack_max_block, &c.pack_max_block_origin}}) {
    if (auto parsed = env(name) ? parse_size(env(name)) : std::nullopt) {
      *value = *parsed;
      *origin = ThresholdOrigin::environment;
    }
  }
  c.p2p_max_bytes = size_or(env("VENEER_P2P_MAX_BYTES"), c.p2p_max_bytes);
  if (auto parsed = env("VENEER_P2P_MIN_BYTES") ? parse_size(env("VENEER_P2P_MIN_BYTES")) : std::nullopt) {
    c.p2p_min_bytes = *parsed;
    c.p2p_min_bytes_origin = ThresholdOrigin::environment;
  }
  c.p2p_nonblocking_min_bytes = c.p2p_min_bytes;
  c.p2p_nonblocking_max_block = c.p2p_max_block;
  c.alltoall_min_bytes = size_or(env("VENEER_ALLTOALL_MIN_BYTES"), c.alltoall_min_bytes);
  c.type_cache_limit = size_or(env("VENEER_TYPE_CACHE"), c.type_cache_limit);
  c.staging_pool = size_or(env("VENEER_STAGING_POOL"), c.staging_pool);
  // Empty or unreadable: as unset (a launcher's `-x VENEER_TRIAL=` must not
  // turn on the trials of every choice).
  if (const char* trial = env("VENEER_TRIAL"); trial && parse_size(trial)) {
    c.trial_calls = static_cast<int>(std::clamp<int64_t>(size_or(trial, c.trial_calls), 0, 1000));
    c.trial_timed = c.trial_calls > 0;
  }
  c.pack_stream_min = size_or(env("VENEER_PACK_STREAM_MIN"), c.pack_stream_min);
  c.device = parse_bool(env("VENEER_DEVICE"), true);
  if (const char* m = env("VENEER_DEVICE_METHOD")) {
    std::string_view s(m);
    if (s == "oneshot" || s == "one-shot") c.device_method = DeviceChoice::oneshot;
    else if (s == "staged") c.device_method = DeviceChoice::staged;
    else c.device_method = DeviceChoice::automatic;
  }
  if (const char* m = env("VENEER_DEVICE_REDUCE")) {
    std::string_view s(m);
    if (s == "device") c.device_reduce = DeviceReduce::device;
    else if (s == "host") c.device_reduce = DeviceReduce::host;
    else c.device_reduce = DeviceReduce::automatic;
  }
  if (const char* a = env("VENEER_CUDA_AWARE")) {
    std::string_view s(a);
    c.cuda_aware = (s == "auto" || s.empty()) ? -1 : (parse_bool(a, false) ? 1 : 0);
  }
  c.device_oneshot_max = size_or(env("VENEER_DEVICE_ONESHOT_MAX"), c.device_oneshot_max);
  c.device_chunk = size_or(env("VENEER_DEVICE_CHUNK"), c.device_chunk);
  if (c.device_chunk <= 0) c.device_chunk = int64_t{1} << 20;
  c.pinned_pool = size_or(env("VENEER_PINNED_POOL"), c.pinned_pool);
  return c;
}

namespace {
// The profile's thresholds, kept so that re-reading the environment after
// MPI_Init (tools and tests do) does not lose them.
std::optional<int64_t> g_profile_p2p_max_block, g_profile_alltoall_max_block, g_profile_pack_max_block;
std::shared_ptr<const SendRules> g_profile_send_rules;

void apply_profile_thresholds(Config& c) {
  const Config defaults;
  auto apply = [](std::optional<int64_t> measured, int64_t fallback, int64_t& value, ThresholdOrigin& origin) {
    if (origin == ThresholdOrigin::environment) return;
    value = measured ? std::max<int64_t>(0, *measured) : fallback;
    origin = measured ? ThresholdOrigin::profile : ThresholdOrigin::built_in;
  };
  // Sends: the per-level tables where the profile has them and the user set
  // neither threshold; else the single threshold, as for the others.
  const bool user_send_rule =
      c.p2p_max_block_origin == ThresholdOrigin::environment || c.p2p_min_bytes_origin == ThresholdOrigin::environment;
  c.send_rules = nullptr;
  if (g_profile_send_rules && !g_profile_send_rules->empty() && !user_send_rule) {
    c.send_rules = g_profile_send_rules;
    c.p2p_max_block = c.send_rules->max_block();
    c.p2p_min_bytes = c.send_rules->min_bytes();
    c.p2p_max_block_origin = c.p2p_min_bytes_origin = ThresholdOrigin::profile;
  } else {
    apply(g_profile_p2p_max_block, defaults.p2p_max_block, c.p2p_max_block, c.p2p_max_block_origin);
    if (c.p2p_min_bytes_origin != ThresholdOrigin::environment) {
      c.p2p_min_bytes = defaults.p2p_min_bytes;
      c.p2p_min_bytes_origin = ThresholdOrigin::built_in;
    }
  }
  c.p2p_one_host_only = !c.send_rules && c.p2p_max_block_origin == ThresholdOrigin::built_in &&
                        c.p2p_min_bytes_origin == ThresholdOrigin::built_in;
  // A profile's send rule (tables or single threshold) was timed one blocking
  // message at a time; a halo exchange posts many at once, and each one taken
  // holds its staging until completion (26 neighbours, 24-byte cells: taken
  // by the tables, 0.62-0.94x of the library). Nonblocking calls stay within
  // the built-in bounds too, which were measured on halo exchanges.
  const bool profile_rule = c.p2p_max_block_origin == ThresholdOrigin::profile;
  c.p2p_nonblocking_min_bytes = profile_rule && c.p2p_min_bytes_origin != ThresholdOrigin::environment
                                    ? std::max(c.p2p_min_bytes, defaults.p2p_min_bytes)
                                    : c.p2p_min_bytes;
  c.p2p_nonblocking_max_block = profile_rule ? std::min(c.p2p_max_block, defaults.p2p_max_block) : c.p2p_max_block;
  apply(g_profile_alltoall_max_block, defaults.alltoall_max_block, c.alltoall_max_block, c.alltoall_max_block_origin);
  apply(g_profile_pack_max_block, defaults.pack_max_block, c.pack_max_block, c.pack_max_block_origin);
}
}  // namespace

CacheWords g_cache_words;

namespace {
// The configuration changed: every type's rule is worked out again.
void configuration_moved() {
  for (auto& count : g_types_unsettled) count.fetch_add(kTypesRecount);
  for (auto& below : g_lean_below) below.store(0);  // after the count: see datatypes/cache.cpp publish
  g_cache_epoch.fetch_add(1, std::memory_order_release);
}
}  // namespace

void reload_config() {
  Config c = parse_config(real_getenv);
  apply_profile_thresholds(c);
  g_config = c;
  configuration_moved();
}

void set_profile_thresholds(std::optional<int64_t> p2p_max_block, std::optional<int64_t> alltoall_max_block,
                            std::optional<int64_t> pack_max_block) {
  g_profile_p2p_max_block = p2p_max_block;
  g_profile_alltoall_max_block = alltoall_max_block;
  g_profile_pack_max_block = pack_max_block;
  apply_profile_thresholds(g_config);
  configuration_moved();
}

void set_profile_send_rules(std::shared_ptr<const SendRules> rules) {
  g_profile_send_rules = std::move(rules);
  apply_profile_thresholds(g_config);
  configuration_moved();
}

std::string_view origin_name(ThresholdOrigin origin, std::string_view variable) {
  switch (origin) {
    case ThresholdOrigin::built_in: return "built-in default";
    case ThresholdOrigin::profile: return "profile";
    case ThresholdOrigin::environment: return variable;
  }
  return "?";
}

}  // namespace veneer
