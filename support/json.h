// SPDX-License-Identifier: BSD-3-Clause
#pragma once
// A small JSON value, parser and writer: enough for Veneer's machine profile
// and benchmark output. Parsing never throws and never aborts: bad input is
// an error value with the byte offset where reading stopped; nesting deeper
// than max_depth is refused, so hostile input cannot exhaust the stack.
// Objects keep their members in the order they were read or added.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace veneer::json {

enum class Kind { null, boolean, number, string, array, object };

class Value {
 public:
  using Array = std::vector<Value>;
  using Member = std::pair<std::string, Value>;
  using Object = std::vector<Member>;

  Value() = default;  // null
  Value(std::nullptr_t) {}
  Value(bool b) : kind_(Kind::boolean), bool_(b) {}
  Value(double d) : kind_(Kind::number), number_(d) {}
  Value(int i) : Value(static_cast<double>(i)) {}
  Value(int64_t i) : Value(static_cast<double>(i)) {}
  Value(const char* s) : kind_(Kind::string), string_(s) {}
  Value(std::string s) : kind_(Kind::string), string_(std::move(s)) {}
  Value(std::string_view s) : kind_(Kind::string), string_(s) {}
  static Value array() {
    Value v;
    v.kind_ = Kind::array;
    return v;
  }
  static Value object() {
    Value v;
    v.kind_ = Kind::object;
    return v;
  }

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::null; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_number() const { return kind_ == Kind::number; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_object() const { return kind_ == Kind::object; }

  // Typed reads: nullopt when the value is of another kind.
  std::optional<bool> as_bool() const;
  std::optional<double> as_number() const;
  // A number that is an integer within int64's range.
  std::optional<int64_t> as_integer() const;
  const std::string* as_string() const { return kind_ == Kind::string ? &string_ : nullptr; }
  const Array* as_array() const { return kind_ == Kind::array ? &array_ : nullptr; }
  const Object* as_object() const { return kind_ == Kind::object ? &object_ : nullptr; }

  // Member `key` of an object (the first if repeated); nullptr if absent or not an object.
  const Value* find(std::string_view key) const;

  // Building: push onto an array, set a member of an object (replacing one of
  // the same key). Both turn a null value into the container first; on a value
  // of another kind they do nothing and return false.
  bool push(Value v);
  bool set(std::string_view key, Value v);

  bool operator==(const Value& other) const;

 private:
  Kind kind_ = Kind::null;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  Array array_;
  Object object_;
};

struct ParseError {
  std::string message;
  size_t offset = 0;  // bytes into the text
};

inline constexpr int max_depth = 64;

// The whole text must be one JSON value (surrounding white space allowed).
// nullopt on error, with `error` filled when given.
std::optional<Value> parse(std::string_view text, ParseError* error = nullptr);

// JSON text of v. indent 0: one line; otherwise pretty-printed with that many
// spaces per level. Numbers are written so they read back exactly; NaN and
// infinities (not JSON) are written as null.
std::string write(const Value& v, int indent = 0);

}  // namespace veneer::json
