// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// JSON for Veneer's machine profile: nlohmann-json (header-only; Debian's
// nlohmann-json3-dev), used so that it never throws into an MPI call. Objects
// keep their members in the order they were added or read (ordered_json), so
// a profile is written in the order its writer builds it. Reading returns an
// error value with the byte offset where reading stopped, and refuses nesting
// deeper than max_depth (a damaged file then costs little to refuse).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace veneer::json {

using Document = nlohmann::ordered_json;

// A JSON value built member by member: bench/calibrate.cpp's record of how it
// measured, kept in the profile as written.
// nlohmann's destructor takes nested values apart with a std::vector (no
// recursion), which could throw bad_alloc; running out of memory there ends
// the process, as anywhere else in a destructor.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct Value {
  Document doc;

  static Value object() { return {Document::object()}; }
  template <class T>
  void set(std::string_view key, T&& v) {
    doc[std::string(key)] = std::forward<T>(v);
  }
  bool is_null() const { return doc.is_null(); }
};

struct ParseError {
  std::string message;
  std::optional<size_t> offset;  // bytes into the text; none when nested too deeply
};

inline constexpr int max_depth = 64;

// Member `key` of an object; nullptr when absent or when `v` is not an object.
inline const Document* find(const Document& v, std::string_view key) {
  const auto it = v.find(key);
  return it == v.end() ? nullptr : &*it;
}

// A number that is an integer within int64's range, written as an integer or
// not (older profiles wrote 100000 as 1e+05); nullopt for anything else.
inline std::optional<int64_t> as_integer(const Document& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_number_float()) return std::nullopt;
  const auto d = v.get<double>();
  // 2^63 itself is not representable; stay strictly inside.
  if (!std::isfinite(d) || std::trunc(d) != d || d < -9.2233720368547758e18 || d >= 9.2233720368547758e18)
    return std::nullopt;
  return static_cast<int64_t>(d);
}

namespace detail {

// Reads a text without building it, to learn where it breaks or nests too deeply.
class Checker final : public nlohmann::json_sax<Document> {
 public:
  ParseError error;

  bool null() override { return true; }
  bool boolean(bool /*val*/) override { return true; }
  bool number_integer(number_integer_t /*val*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*val*/) override { return true; }
  bool number_float(number_float_t /*val*/, const string_t& /*s*/) override { return true; }
  bool string(string_t& /*val*/) override { return true; }
  bool binary(binary_t& /*val*/) override { return true; }
  bool key(string_t& /*val*/) override { return true; }
  bool start_object(std::size_t /*elements*/) override { return open(); }
  bool start_array(std::size_t /*elements*/) override { return open(); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t position, const std::string& /*last_token*/, const Document::exception& ex) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ...": the text after the tag.
    std::string_view what = ex.what();
    if (const size_t tag = what.find("] "); tag != std::string_view::npos) what.remove_prefix(tag + 2);
    // nlohmann counts the bytes read, the offending one (or the end) included.
    error = {std::string(what), position > 0 ? position - 1 : 0};
    return false;
  }

 private:
  int depth_ = 0;

  bool open() {
    if (++depth_ <= max_depth) return true;
    error = {"nested deeper than " + std::to_string(max_depth) + " levels", std::nullopt};
    return false;
  }
  bool close() {
    --depth_;
    return true;
  }
};

// Keeps the first of a repeated member, as Veneer's reader always has
// (nlohmann keeps the last): a parse callback that skips a name already seen
// in the same object. `depth` counts the containers open around the event.
class FirstMember {
 public:
  bool operator()(int depth, Document::parse_event_t event, Document& parsed) {
    const auto d = static_cast<size_t>(depth);
    if (event == Document::parse_event_t::object_start || event == Document::parse_event_t::array_start) {
      names_.resize(d);  // the container opened last at this depth is closed
      names_.emplace_back();
    } else if (event == Document::parse_event_t::key && d > 0) {
      names_.resize(d);  // the object of this member is the innermost open container, d - 1
      return names_[d - 1].insert(parsed.get<std::string>()).second;
    }
    return true;
  }

 private:
  std::vector<std::set<std::string, std::less<>>> names_;  // per open container; arrays have none
};

}  // namespace detail

// The whole text must be one JSON value (surrounding white space allowed).
// nullopt on error, with `error` filled when given. Never throws.
inline std::optional<Document> parse(std::string_view text, ParseError* error = nullptr) {
  try {
    detail::Checker check;
    if (!Document::sax_parse(text, &check)) {
      if (error) *error = std::move(check.error);
      return std::nullopt;
    }
    Document doc = Document::parse(text, detail::FirstMember(), /*allow_exceptions=*/false);
    if (doc.is_discarded()) {  // not expected once the check passed
      if (error) *error = {"not JSON", std::nullopt};
      return std::nullopt;
    }
    return doc;
  } catch (const std::bad_alloc&) {
    if (error) *error = {"out of memory", std::nullopt};
    return std::nullopt;
  }
}

// JSON text of v. indent 0: one line; otherwise pretty-printed with that many
// spaces per level. Numbers read back exactly, in nlohmann's spelling (a double
// keeps a ".0": 12.0, 0.0001, 2500000000.0, where Veneer's own writer before it
// wrote 12, 1e-04, 2.5e+09); NaN and infinities (not JSON) are written as
// null; bytes that are not UTF-8 become U+FFFD instead of throwing.
inline std::string write(const Document& v, int indent = 0) {
  return v.dump(indent > 0 ? indent : -1, ' ', /*ensure_ascii=*/false, Document::error_handler_t::replace);
}

}  // namespace veneer::json
