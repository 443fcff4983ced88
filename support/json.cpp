// SPDX-License-Identifier: BSD-3-Clause
#include "support/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <new>

namespace veneer::json {

// ---- Value -------------------------------------------------------------------

std::optional<bool> Value::as_bool() const {
  if (kind_ != Kind::boolean) return std::nullopt;
  return bool_;
}

std::optional<double> Value::as_number() const {
  if (kind_ != Kind::number) return std::nullopt;
  return number_;
}

std::optional<int64_t> Value::as_integer() const {
  if (kind_ != Kind::number || !std::isfinite(number_) || std::trunc(number_) != number_) return std::nullopt;
  // 2^63 itself is not representable; stay strictly inside.
  if (number_ < -9.2233720368547758e18 || number_ >= 9.2233720368547758e18) return std::nullopt;
  return static_cast<int64_t>(number_);
}

const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::object) return nullptr;
  for (const Member& m : object_)
    if (m.first == key) return &m.second;
  return nullptr;
}

bool Value::push(Value v) {
  if (kind_ == Kind::null) kind_ = Kind::array;
  if (kind_ != Kind::array) return false;
  array_.push_back(std::move(v));
  return true;
}

bool Value::set(std::string_view key, Value v) {
  if (kind_ == Kind::null) kind_ = Kind::object;
  if (kind_ != Kind::object) return false;
  for (Member& m : object_)
    if (m.first == key) {
      m.second = std::move(v);
      return true;
    }
  object_.emplace_back(std::string(key), std::move(v));
  return true;
}

bool Value::operator==(const Value& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::null: return true;
    case Kind::boolean: return bool_ == o.bool_;
    case Kind::number: return number_ == o.number_;
    case Kind::string: return string_ == o.string_;
    case Kind::array: return array_ == o.array_;
    case Kind::object: return object_ == o.object_;
  }
  return false;
}

// ---- Parser --------------------------------------------------------------------

namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  std::optional<Value> document(ParseError* error) {
    std::optional<Value> v = value(0);
    if (v) {
      skip_space();
      if (at_ < s_.size()) {
        v.reset();
        fail("unexpected text after the value");
      }
    }
    if (!v && error) *error = {message_, at_};
    return v;
  }

 private:
  std::string_view s_;
  size_t at_ = 0;
  std::string message_;

  std::nullopt_t fail(const char* why) {
    if (message_.empty()) message_ = why;
    return std::nullopt;
  }

  void skip_space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r')) ++at_;
  }

  bool literal(std::string_view word) {
    if (s_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  std::optional<Value> value(int depth) {
    skip_space();
    if (at_ >= s_.size()) return fail("unexpected end of text");
    switch (s_[at_]) {
      case '{': return object(depth + 1);
      case '[': return array(depth + 1);
      case '"': {
        auto text = string();
        if (!text) return std::nullopt;
        return Value(std::move(*text));
      }
      case 't':
        if (literal("true")) return Value(true);
        return fail("bad literal");
      case 'f':
        if (literal("false")) return Value(false);
        return fail("bad literal");
      case 'n':
        if (literal("null")) return Value();
        return fail("bad literal");
      default: return number();
    }
  }

  std::optional<Value> number() {
    // JSON's grammar, checked by hand: from_chars alone would take "inf", "1.", ".5" or a leading '+'.
    const size_t start = at_;
    auto digits = [&] {
      size_t n = 0;
      while (at_ < s_.size() && s_[at_] >= '0' && s_[at_] <= '9') ++at_, ++n;
      return n;
    };
    if (at_ < s_.size() && s_[at_] == '-') ++at_;
    if (at_ < s_.size() && s_[at_] == '0') {
      ++at_;
    } else if (digits() == 0) {
      at_ = start;
      return fail("expected a value");
    }
    if (at_ < s_.size() && s_[at_] == '.') {
      ++at_;
      if (digits() == 0) return fail("expected digits after '.'");
    }
    if (at_ < s_.size() && (s_[at_] == 'e' || s_[at_] == 'E')) {
      ++at_;
      if (at_ < s_.size() && (s_[at_] == '+' || s_[at_] == '-')) ++at_;
      if (digits() == 0) return fail("expected digits in the exponent");
    }
    double v = 0;
    auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + at_, v);
    if (ec == std::errc::result_out_of_range) return fail("number out of range");
    if (ec != std::errc() || end != s_.data() + at_) return fail("bad number");
    return Value(v);
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::optional<uint32_t> hex4() {
    if (s_.size() - at_ < 4) return fail("short \\u escape");
    uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = s_[at_++];
      cp <<= 4;
      if (c >= '0' && c <= '9') cp |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') cp |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') cp |= static_cast<uint32_t>(c - 'A' + 10);
      else return fail("bad \\u escape");
    }
    return cp;
  }

  std::optional<std::string> string() {
    ++at_;  // the opening quote
    std::string out;
    for (;;) {
      if (at_ >= s_.size()) return fail("unterminated string");
      const char c = s_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) return fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= s_.size()) return fail("unterminated string");
      switch (s_[at_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          auto cp = hex4();
          if (!cp) return std::nullopt;
          if (*cp >= 0xD800 && *cp < 0xDC00) {  // a high surrogate needs its low half
            if (!literal("\\u")) return fail("unpaired surrogate");
            auto low = hex4();
            if (!low) return std::nullopt;
            if (*low < 0xDC00 || *low >= 0xE000) return fail("unpaired surrogate");
            *cp = 0x10000 + ((*cp - 0xD800) << 10) + (*low - 0xDC00);
          } else if (*cp >= 0xDC00 && *cp < 0xE000) {
            return fail("unpaired surrogate");
          }
          append_utf8(out, *cp);
          break;
        }
        default: return fail("bad escape");
      }
    }
  }

  std::optional<Value> array(int depth) {
    if (depth > max_depth) return fail("nested too deeply");
    ++at_;
    Value out = Value::array();
    skip_space();
    if (at_ < s_.size() && s_[at_] == ']') {
      ++at_;
      return out;
    }
    for (;;) {
      auto item = value(depth);
      if (!item) return std::nullopt;
      out.push(std::move(*item));
      skip_space();
      if (at_ >= s_.size()) return fail("unterminated array");
      const char c = s_[at_++];
      if (c == ']') return out;
      if (c != ',') return fail("expected ',' or ']'");
    }
  }

  std::optional<Value> object(int depth) {
    if (depth > max_depth) return fail("nested too deeply");
    ++at_;
    Value out = Value::object();
    skip_space();
    if (at_ < s_.size() && s_[at_] == '}') {
      ++at_;
      return out;
    }
    for (;;) {
      skip_space();
      if (at_ >= s_.size() || s_[at_] != '"') return fail("expected a member name");
      auto key = string();
      if (!key) return std::nullopt;
      skip_space();
      if (at_ >= s_.size() || s_[at_] != ':') return fail("expected ':'");
      ++at_;
      auto item = value(depth);
      if (!item) return std::nullopt;
      // A repeated name keeps the first value (find() returns the first anyway).
      if (!out.find(*key)) out.set(*key, std::move(*item));
      skip_space();
      if (at_ >= s_.size()) return fail("unterminated object");
      const char c = s_[at_++];
      if (c == '}') return out;
      if (c != ',') return fail("expected ',' or '}'");
    }
  }
};

// ---- Writer --------------------------------------------------------------------

void write_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char esc[8];
          std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += esc;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void write_number(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof text, d);  // shortest text that reads back exactly
  if (ec != std::errc()) {
    out += "null";
    return;
  }
  out.append(text, end);
}

void write_value(std::string& out, const Value& v, int indent, int level) {
  auto newline = [&](int lvl) {
    if (indent <= 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(lvl), ' ');
  };
  switch (v.kind()) {
    case Kind::null: out += "null"; return;
    case Kind::boolean: out += *v.as_bool() ? "true" : "false"; return;
    case Kind::number: write_number(out, *v.as_number()); return;
    case Kind::string: write_string(out, *v.as_string()); return;
    case Kind::array: {
      const auto& a = *v.as_array();
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        write_value(out, a[i], indent, level + 1);
      }
      if (!a.empty()) newline(level);
      out += ']';
      return;
    }
    case Kind::object: {
      const auto& o = *v.as_object();
      out += '{';
      for (size_t i = 0; i < o.size(); ++i) {
        if (i) out += ',';
        newline(level + 1);
        write_string(out, o[i].first);
        out += indent > 0 ? ": " : ":";
        write_value(out, o[i].second, indent, level + 1);
      }
      if (!o.empty()) newline(level);
      out += '}';
      return;
    }
  }
}

}  // namespace

std::optional<Value> parse(std::string_view text, ParseError* error) {
  try {
    return Parser(text).document(error);
  } catch (const std::bad_alloc&) {
    if (error) *error = {"out of memory", 0};
    return std::nullopt;
  }
}

std::string write(const Value& v, int indent) {
  std::string out;
  write_value(out, v, indent, 0);
  return out;
}

}  // namespace veneer::json
