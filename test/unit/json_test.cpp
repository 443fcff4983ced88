// SPDX-License-Identifier: BSD-3-Clause
// support/json.h (nlohmann-json behind Veneer's never-throwing reads): values,
// the parser's errors, depth limit and round trips; and the profile file's
// text, byte for byte as the writer before nlohmann wrote it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "support/json.h"
#include "topology/profile.h"

namespace veneer::json {
namespace {

namespace topo = veneer::topology;

TEST(Json, ParsesEveryKind) {
  auto v = parse(R"( {"a": 1, "b": [true, false, null], "c": "x\ny", "d": -2.5e3, "e": {}, "f": []} )");
  ASSERT_TRUE(v);
  ASSERT_TRUE(v->is_object());
  EXPECT_EQ(as_integer(*find(*v, "a")), 1);
  const Document* b = find(*v, "b");
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(b->is_array());
  ASSERT_EQ(b->size(), 3u);
  EXPECT_EQ((*b)[0], true);
  EXPECT_EQ((*b)[1], false);
  EXPECT_TRUE((*b)[2].is_null());
  EXPECT_EQ(find(*v, "c")->get<std::string>(), "x\ny");
  EXPECT_EQ(find(*v, "d")->get<double>(), -2500.0);
  EXPECT_TRUE(find(*v, "e")->is_object());
  EXPECT_TRUE(find(*v, "f")->is_array());
  EXPECT_TRUE(find(*v, "f")->empty());
  EXPECT_EQ(find(*v, "missing"), nullptr);
  // Integer reads refuse other kinds.
  EXPECT_FALSE(as_integer(*find(*v, "c")));
  EXPECT_EQ(as_integer(*find(*v, "d")), -2500);  // written as a fraction, integral in value
  EXPECT_FALSE(as_integer((*b)[0]));
  EXPECT_EQ(find(*find(*v, "a"), "x"), nullptr);  // not an object
  EXPECT_EQ(find(*b, "x"), nullptr);              // nor is an array
}

TEST(Json, Numbers) {
  EXPECT_EQ(parse("0")->get<double>(), 0.0);
  EXPECT_EQ(parse("-0.125")->get<double>(), -0.125);
  EXPECT_EQ(parse("1E2")->get<double>(), 100.0);
  EXPECT_EQ(parse("1e-2")->get<double>(), 0.01);
  EXPECT_EQ(as_integer(*parse("4194304")), 4194304);
  EXPECT_EQ(as_integer(*parse("-3")), -3);
  EXPECT_EQ(as_integer(*parse("1e+05")), 100000);  // how the writer before nlohmann spelled 100000
  EXPECT_EQ(as_integer(*parse("9223372036854775807")), INT64_MAX);
  EXPECT_FALSE(as_integer(*parse("9223372036854775808")));
  EXPECT_FALSE(as_integer(*parse("2.5")));
  EXPECT_FALSE(as_integer(*parse("1e300")));
  EXPECT_FALSE(as_integer(*parse("true")));
}

TEST(Json, RefusesWhatJsonDoesNotSpellAsANumber) {
  for (const char* bad : {"01", "+1", ".5", "1.", "1e", "1e+", "-", "inf", "NaN", "0x10", "1e999", "--1"}) {
    ParseError e;
    EXPECT_FALSE(parse(bad, &e)) << bad;
    EXPECT_FALSE(e.message.empty()) << bad;
  }
}

TEST(Json, Strings) {
  EXPECT_EQ(parse(R"("\"\\\/\b\f\n\r\t")")->get<std::string>(), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(parse(R"("\u00e9\u20ac")")->get<std::string>(), "\xc3\xa9\xe2\x82\xac");
  EXPECT_EQ(parse(R"("\ud83d\ude00")")->get<std::string>(), "\xf0\x9f\x98\x80");  // a surrogate pair
  for (const char* bad : {R"("abc)", R"("\x")", R"("\u12")", R"("\ud83d")", R"("\ude00")", "\"a\tb\"", R"("\)"}) {
    ParseError e;
    EXPECT_FALSE(parse(bad, &e)) << bad;
  }
}

TEST(Json, ErrorsAreValuesWithAnOffset) {
  struct Case {
    const char* text;
    size_t at_least;
  };
  for (const Case& c :
       {Case{"", 0}, Case{"{", 1}, Case{"[1,2", 4}, Case{"[1,]", 3}, Case{"{\"a\" 1}", 5}, Case{"{\"a\":1,}", 7},
        Case{"{1:2}", 1}, Case{"[1] x", 4}, Case{"tru", 0}, Case{"nul", 0}, Case{R"({"a":[1,{"b":}]})", 12}}) {
    ParseError e;
    EXPECT_FALSE(parse(c.text, &e)) << c.text;
    EXPECT_FALSE(e.message.empty()) << c.text;
    ASSERT_TRUE(e.offset) << c.text << ": " << e.message;
    EXPECT_GE(*e.offset, c.at_least) << c.text << ": " << e.message;
    EXPECT_LE(*e.offset, std::string(c.text).size()) << c.text;
  }
  EXPECT_FALSE(parse("[1,2"));  // no error object: still just nullopt
}

TEST(Json, DepthIsBounded) {
  std::string ok(max_depth, '['), deep(max_depth + 1, '['), hostile(1'000'000, '[');
  ok += std::string(max_depth, ']');
  deep += std::string(max_depth + 1, ']');
  EXPECT_TRUE(parse(ok));
  ParseError e;
  EXPECT_FALSE(parse(deep, &e));
  EXPECT_NE(e.message.find("deep"), std::string::npos) << e.message;
  EXPECT_FALSE(parse(hostile));  // a million brackets: refused, no stack overflow
  std::string objects;
  for (int i = 0; i < 1000; ++i) objects += "{\"a\":";
  EXPECT_FALSE(parse(objects));
}

TEST(Json, BuildsAndWrites) {
  Value v = Value::object();  // the calibration tool's record
  v.set("name", "allreduce");
  v.set("bytes", int64_t{4096});
  v.set("seconds", 1.25e-5);
  v.set("ok", true);
  v.set("list", Document{1, "two", nullptr});
  v.set("bytes", 8192);  // replaces, keeps the position
  EXPECT_FALSE(v.is_null());
  EXPECT_EQ(write(v.doc), R"({"name":"allreduce","bytes":8192,"seconds":1.25e-05,"ok":true,"list":[1,"two",null]})");
  EXPECT_TRUE(Value().is_null());
  EXPECT_EQ(write(Document::array()), "[]");
  EXPECT_EQ(write(Document::object(), 2), "{}");
  EXPECT_EQ(write(Document{1, "two", nullptr}, 2), "[\n  1,\n  \"two\",\n  null\n]");
  // Not JSON numbers become null.
  EXPECT_EQ(write(Document(std::numeric_limits<double>::infinity())), "null");
  EXPECT_EQ(write(Document(std::nan(""))), "null");
  // Control characters and quotes are escaped; bytes that are not UTF-8 are replaced, not thrown over.
  EXPECT_EQ(write(Document(std::string("a\"b\\c\x01"))), R"("a\"b\\c\u0001")");
  EXPECT_EQ(write(Document(std::string("caf\xe9"))), "\"caf\xef\xbf\xbd\"");
}

TEST(Json, RoundTrips) {
  const char* text = R"({"format":"veneer-profile","version":1,"x":[0.1,1e-9,123456789012,-3.3333333333333335,5e-324],)"
                     R"("s":"\u00e9 \"q\" \n","nested":{"a":{"b":[[],{}]}}})";
  auto v = parse(text);
  ASSERT_TRUE(v);
  for (int indent : {0, 1, 4}) {
    auto again = parse(write(*v, indent));
    ASSERT_TRUE(again) << write(*v, indent);
    EXPECT_EQ(*again, *v) << indent;
  }
  // Members keep their order.
  EXPECT_EQ(v->begin().key(), "format");
  // Doubles come back bit for bit.
  EXPECT_EQ(parse(write(Document(0.1 + 0.2)))->get<double>(), 0.1 + 0.2);
  // A repeated member keeps the first value, at every depth (nlohmann alone would keep the last).
  EXPECT_EQ(as_integer(*find(*parse(R"({"a":1,"a":2})"), "a")), 1);
  auto repeated = parse(R"({"a":{"b":[{"c":1,"c":{"d":2}},{"c":3}],"b":4,"e":{"e":5,"e":6}},"a":7,"f":8})");
  ASSERT_TRUE(repeated);
  EXPECT_EQ(write(*repeated), R"({"a":{"b":[{"c":1},{"c":3}],"e":{"e":5}},"f":8})");
}

TEST(Json, GarbageNeverCrashes) {
  // Every prefix of a valid document, and bytes flipped in it: an error or a value, never a crash.
  const std::string doc = R"({"levels":{"intra":{"alpha":1e-6,"beta":2e-10}},"c":[{"t":{"lib":{"median":1}}}]})";
  for (size_t n = 0; n < doc.size(); ++n) EXPECT_FALSE(parse(doc.substr(0, n))) << n;
  for (size_t i = 0; i < doc.size(); ++i)
    for (char c : {'\0', '"', '{', ']', '\\', 'x', '\xff'}) {
      std::string broken = doc;
      broken[i] = c;
      (void)parse(broken);
    }
}

// ---- The profile file's text ------------------------------------------------------

topo::Profile written_profile() {
  topo::Profile p;
  p.fingerprint = {"0123456789abcdef", "Example CPU @ 2.0GHz", "Open MPI v4.1.4", "ob1", "0.9.0"};
  p.created = "2026-11-26T14:00:00Z";
  p.machine = "1 package, \"16\" cores,\tcaf\xc3\xa9";
  p.calibration = json::Value::object();
  p.calibration.set("ranks", 8);
  p.calibration.set("quick", true);
  p.calibration.set("batch_seconds", 0.05);
  p.intra = topo::LevelFit{1.5e-06, 2.5e-10, 1.25e-10, 0.03125, {{4096, 2, 3.0517578125e-06}}};
  p.nic_streams = 2;
  topo::CollectivePoint c;
  c.collective = "allreduce";
  c.ranks = 8;
  c.nodes = 2;
  c.ranks_per_node = 4;
  c.min_ranks_per_node = 3;
  c.node_consecutive = false;
  c.bytes = 1048576;
  c.times = {{"library", {0.000125, 0.015625, 0.00025}}, {"two_level", {9.765625e-05, 0.0078125, 0}}};
  p.collectives.push_back(c);
  p.p2p = topo::P2pProfile{};
  p.p2p->inter = topo::P2pLevel{64, {{64, 65536, {2e-05, 0.03, 0}, {1.5e-05, 0.04, 0}}}};
  return p;
}

// written_profile() as support/json.cpp (the writer before nlohmann) wrote it.
const char* const written_before = R"({
 "format": "veneer-profile",
 "version": 1,
 "fingerprint": {
  "topology": "0123456789abcdef",
  "cpu": "Example CPU @ 2.0GHz",
  "mpi": "Open MPI v4.1.4",
  "transport": "ob1",
  "veneer": "0.9.0"
 },
 "created": "2026-11-26T14:00:00Z",
 "machine": "1 package, \"16\" cores,\tcafé",
 "calibration": {
  "ranks": 8,
  "quick": true,
  "batch_seconds": 0.05
 },
 "levels": {
  "intra": {
   "alpha": 1.5e-06,
   "beta": 2.5e-10,
   "gamma": 1.25e-10,
   "fit_error": 0.03125,
   "points": [
    {
     "bytes": 4096,
     "pairs": 2,
     "seconds": 3.0517578125e-06
    }
   ]
  }
 },
 "nic_streams": 2,
 "collectives": [
  {
   "collective": "allreduce",
   "ranks": 8,
   "nodes": 2,
   "ranks_per_node": 4,
   "min_ranks_per_node": 3,
   "node_consecutive": false,
   "bytes": 1048576,
   "times": {
    "library": {
     "median": 0.000125,
     "spread": 0.015625,
     "returned": 0.00025
    },
    "two_level": {
     "median": 9.765625e-05,
     "spread": 0.0078125
    }
   }
  }
 ],
 "p2p": {
  "inter": {
   "max_block": 64,
   "points": [
    {
     "block": 64,
     "bytes": 65536,
     "library": {
      "median": 2e-05,
      "spread": 0.03
     },
     "veneer": {
      "median": 1.5e-05,
      "spread": 0.04
     }
    }
   ]
  }
 }
}
)";

TEST(ProfileText, WrittenByteForByteAsBefore) { EXPECT_EQ(topo::profile_text(written_profile()), written_before); }

TEST(ProfileText, RoundTripsItsData) {
  auto back = topo::profile_from_text(written_before, nullptr);
  ASSERT_EQ(back.status, topo::ProfileStatus::loaded) << back.why;
  const topo::Profile& p = *back.profile;
  EXPECT_EQ(p.fingerprint, written_profile().fingerprint);
  EXPECT_EQ(p.machine, "1 package, \"16\" cores,\tcaf\xc3\xa9");
  EXPECT_EQ(p.calibration.doc, written_profile().calibration.doc);
  ASSERT_TRUE(p.intra);
  EXPECT_EQ(p.intra->alpha, 1.5e-06);
  EXPECT_EQ(p.intra->fit_error, 0.03125);
  ASSERT_EQ(p.intra->points.size(), 1u);
  EXPECT_EQ(p.intra->points[0].bytes, 4096);
  EXPECT_EQ(p.intra->points[0].pairs, 2);
  EXPECT_EQ(p.intra->points[0].seconds, 3.0517578125e-06);
  EXPECT_FALSE(p.inter);
  EXPECT_EQ(p.nic_streams, 2);
  ASSERT_EQ(p.collectives.size(), 1u);
  const topo::CollectivePoint& c = p.collectives[0];
  EXPECT_EQ(c.collective, "allreduce");
  EXPECT_EQ(c.min_ranks_per_node, 3);
  EXPECT_FALSE(c.node_consecutive);
  EXPECT_EQ(c.bytes, 1048576);
  ASSERT_EQ(c.times.size(), 2u);
  EXPECT_EQ(c.times[0].first, "library");
  EXPECT_EQ(c.times[0].second.returned, 0.00025);
  EXPECT_EQ(c.times[1].first, "two_level");
  EXPECT_EQ(c.times[1].second.median, 9.765625e-05);
  ASSERT_TRUE(p.p2p && p.p2p->inter);
  EXPECT_FALSE(p.p2p->intra);
  EXPECT_EQ(p.p2p->inter->max_block, 64);
  ASSERT_EQ(p.p2p->inter->points.size(), 1u);
  EXPECT_EQ(p.p2p->inter->points[0].veneer.median, 1.5e-05);
  EXPECT_EQ(topo::profile_text(p), written_before);
}

TEST(ProfileText, ReadsTheOldNumberSpellings) {
  // The writer before nlohmann wrote the shortest of fixed and exponent
  // notation, integers included; nlohmann spells some values otherwise
  // (100000, 0.0, 0.0001). Both read to the same values.
  std::string old = written_before;
  for (auto [from, to] :
       {std::pair{R"("bytes": 4096)", R"("bytes": 1e+05)"}, std::pair{R"("gamma": 1.25e-10)", R"("gamma": 0)"},
        std::pair{R"("fit_error": 0.03125)", R"("fit_error": 1e-04)"}}) {
    const size_t at = old.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    old.replace(at, std::string(from).size(), to);
  }
  auto back = topo::profile_from_text(old, nullptr);
  ASSERT_EQ(back.status, topo::ProfileStatus::loaded) << back.why;
  ASSERT_TRUE(back.profile->intra);
  EXPECT_EQ(back.profile->intra->points.at(0).bytes, 100000);
  EXPECT_EQ(back.profile->intra->gamma, 0.0);
  EXPECT_EQ(back.profile->intra->fit_error, 1e-4);
  const std::string again = topo::profile_text(*back.profile);
  EXPECT_NE(again.find(R"("bytes": 100000,)"), std::string::npos) << again;
  EXPECT_NE(again.find(R"("gamma": 0.0,)"), std::string::npos) << again;
  EXPECT_NE(again.find(R"("fit_error": 0.0001,)"), std::string::npos) << again;
}

}  // namespace
}  // namespace veneer::json
