// SPDX-License-Identifier: BSD-3-Clause
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "support/config.h"

namespace {
std::map<std::string, std::string> g_env;
const char* fake_env(const char* name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}
}  // namespace

TEST(Config, ParsesSizes) {
  EXPECT_EQ(veneer::parse_size("0"), 0);
  EXPECT_EQ(veneer::parse_size("64k"), 65536);
  EXPECT_EQ(veneer::parse_size("1M"), 1 << 20);
  EXPECT_EQ(veneer::parse_size("2GiB"), int64_t{2} << 30);
  EXPECT_FALSE(veneer::parse_size("x"));
  EXPECT_FALSE(veneer::parse_size("12q"));
  EXPECT_FALSE(veneer::parse_size(""));
}

TEST(Config, DefaultsAndSwitches) {
  g_env.clear();
  auto c = veneer::parse_config(fake_env);
  EXPECT_TRUE(c.enabled);
  EXPECT_TRUE(c.datatypes);
  EXPECT_EQ(c.report, 0);
  EXPECT_EQ(c.pack_stream_min, -1);  // -1: from the last-level cache
  g_env = {{"VENEER_DISABLE", "1"}, {"VENEER_DATATYPES", "0"},      {"VENEER_REPORT", "1"},
           {"VENEER_LOG", "debug"}, {"VENEER_P2P_MAX_BLOCK", "4k"}, {"VENEER_PACK_STREAM_MIN", "16M"}};
  c = veneer::parse_config(fake_env);
  EXPECT_FALSE(c.enabled);
  EXPECT_FALSE(c.datatypes);
  EXPECT_EQ(c.report, 1);
  EXPECT_EQ(c.log_level, veneer::LogLevel::debug);
  EXPECT_EQ(c.p2p_max_block, 4096);
  EXPECT_EQ(c.pack_stream_min, int64_t{16} << 20);
}

TEST(Config, DeviceSwitches) {
  g_env.clear();
  auto c = veneer::parse_config(fake_env);
  EXPECT_TRUE(c.device);
  EXPECT_EQ(c.device_method, veneer::DeviceChoice::automatic);
  EXPECT_EQ(c.cuda_aware, -1);  // -1: asked from the library
  EXPECT_EQ(c.device_oneshot_max, int64_t{256} << 10);
  EXPECT_EQ(c.device_chunk, int64_t{1} << 20);
  g_env = {{"VENEER_DEVICE", "0"},         {"VENEER_DEVICE_METHOD", "staged"},  {"VENEER_CUDA_AWARE", "1"},
           {"VENEER_DEVICE_CHUNK", "64k"}, {"VENEER_DEVICE_ONESHOT_MAX", "1M"}, {"VENEER_PINNED_POOL", "8M"}};
  c = veneer::parse_config(fake_env);
  EXPECT_FALSE(c.device);
  EXPECT_EQ(c.device_method, veneer::DeviceChoice::staged);
  EXPECT_EQ(c.cuda_aware, 1);
  EXPECT_EQ(c.device_chunk, int64_t{64} << 10);
  EXPECT_EQ(c.device_oneshot_max, int64_t{1} << 20);
  EXPECT_EQ(c.pinned_pool, int64_t{8} << 20);
  g_env = {{"VENEER_DEVICE_METHOD", "oneshot"}, {"VENEER_CUDA_AWARE", "0"}, {"VENEER_DEVICE_CHUNK", "0"}};
  c = veneer::parse_config(fake_env);
  EXPECT_EQ(c.device_method, veneer::DeviceChoice::oneshot);
  EXPECT_EQ(c.cuda_aware, 0);
  EXPECT_EQ(c.device_chunk, int64_t{1} << 20);  // a zero chunk would never finish: the default instead
}

// VENEER_TRIAL: unset, trials of untimed rank counts and thin leads only
// (trial_timed false); a number, every choice; empty or unreadable, as
// unset (a launcher's `-x VENEER_TRIAL=` once turned every choice's on).
TEST(Config, TrialSwitch) {
  g_env.clear();
  auto c = veneer::parse_config(fake_env);
  EXPECT_EQ(c.trial_calls, 32);
  EXPECT_FALSE(c.trial_timed);
  for (const char* value : {"", "many"}) {
    g_env = {{"VENEER_TRIAL", value}};
    c = veneer::parse_config(fake_env);
    EXPECT_EQ(c.trial_calls, 32) << "'" << value << "'";
    EXPECT_FALSE(c.trial_timed) << "'" << value << "'";
  }
  g_env = {{"VENEER_TRIAL", "8"}};
  c = veneer::parse_config(fake_env);
  EXPECT_EQ(c.trial_calls, 8);
  EXPECT_TRUE(c.trial_timed);
  g_env = {{"VENEER_TRIAL", "0"}};
  c = veneer::parse_config(fake_env);
  EXPECT_EQ(c.trial_calls, 0);
  EXPECT_FALSE(c.trial_timed);
}
