// SPDX-License-Identifier: BSD-3-Clause
// support/json: values, the parser's errors, depth limit and round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "support/json.h"

namespace veneer::json {
namespace {

TEST(Json, ParsesEveryKind) {
  auto v = parse(R"( {"a": 1, "b": [true, false, null], "c": "x\ny", "d": -2.5e3, "e": {}, "f": []} )");
  ASSERT_TRUE(v);
  ASSERT_TRUE(v->is_object());
  EXPECT_EQ(v->find("a")->as_integer(), 1);
  const auto* b = v->find("b")->as_array();
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->size(), 3u);
  EXPECT_EQ((*b)[0].as_bool(), true);
  EXPECT_EQ((*b)[1].as_bool(), false);
  EXPECT_TRUE((*b)[2].is_null());
  EXPECT_EQ(*v->find("c")->as_string(), "x\ny");
  EXPECT_EQ(v->find("d")->as_number(), -2500.0);
  EXPECT_TRUE(v->find("e")->is_object());
  EXPECT_TRUE(v->find("f")->as_array()->empty());
  EXPECT_EQ(v->find("missing"), nullptr);
  // Typed reads refuse other kinds.
  EXPECT_FALSE(v->find("c")->as_number());
  EXPECT_FALSE(v->find("a")->as_string());
  EXPECT_FALSE(v->find("d")->as_bool());
  EXPECT_EQ(v->find("a")->find("x"), nullptr);  // not an object
}

TEST(Json, Numbers) {
  EXPECT_EQ(parse("0")->as_number(), 0.0);
  EXPECT_EQ(parse("-0.125")->as_number(), -0.125);
  EXPECT_EQ(parse("1E2")->as_number(), 100.0);
  EXPECT_EQ(parse("1e-2")->as_number(), 0.01);
  EXPECT_EQ(parse("4194304")->as_integer(), 4194304);
  EXPECT_FALSE(parse("2.5")->as_integer());
  EXPECT_FALSE(parse("1e300")->as_integer());
  for (const char* bad : {"01", "+1", ".5", "1.", "1e", "1e+", "-", "inf", "NaN", "0x10", "1e999", "--1"}) {
    ParseError e;
    EXPECT_FALSE(parse(bad, &e)) << bad;
    EXPECT_FALSE(e.message.empty()) << bad;
  }
}

TEST(Json, Strings) {
  EXPECT_EQ(*parse(R"("\"\\\/\b\f\n\r\t")")->as_string(), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(*parse(R"("\u00e9\u20ac")")->as_string(), "\xc3\xa9\xe2\x82\xac");
  EXPECT_EQ(*parse(R"("\ud83d\ude00")")->as_string(), "\xf0\x9f\x98\x80");  // a surrogate pair
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
        Case{"{1:2}", 1}, Case{"[1] x", 4}, Case{"tru", 0}, Case{"nul", 0}, Case{"{\"a\":[1,{\"b\":}]}", 12}}) {
    ParseError e;
    EXPECT_FALSE(parse(c.text, &e)) << c.text;
    EXPECT_FALSE(e.message.empty()) << c.text;
    EXPECT_GE(e.offset, c.at_least) << c.text << ": " << e.message;
    EXPECT_LE(e.offset, std::string(c.text).size()) << c.text;
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
  Value v = Value::object();
  v.set("name", "allreduce");
  v.set("bytes", int64_t{4096});
  v.set("seconds", 1.25e-5);
  v.set("ok", true);
  Value list = Value::array();
  list.push(1);
  list.push("two");
  list.push(Value());
  v.set("list", list);
  v.set("bytes", 8192);  // replaces, keeps the position
  EXPECT_EQ(write(v), R"({"name":"allreduce","bytes":8192,"seconds":1.25e-05,"ok":true,"list":[1,"two",null]})");
  EXPECT_EQ(write(Value::array()), "[]");
  EXPECT_EQ(write(Value::object(), 2), "{}");
  EXPECT_EQ(write(list, 2), "[\n  1,\n  \"two\",\n  null\n]");
  // Containers refuse building on the wrong kind.
  Value n = 3;
  EXPECT_FALSE(n.push(1));
  EXPECT_FALSE(n.set("a", 1));
  // Not JSON numbers become null.
  EXPECT_EQ(write(Value(std::numeric_limits<double>::infinity())), "null");
  EXPECT_EQ(write(Value(std::nan(""))), "null");
  // Control characters and quotes are escaped.
  EXPECT_EQ(write(Value(std::string("a\"b\\c\x01"))), R"("a\"b\\c\u0001")");
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
  // Doubles come back bit for bit.
  EXPECT_EQ(parse(write(Value(0.1 + 0.2)))->as_number(), 0.1 + 0.2);
  // A repeated member keeps the first value.
  EXPECT_EQ(parse(R"({"a":1,"a":2})")->find("a")->as_integer(), 1);
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

}  // namespace
}  // namespace veneer::json
