// Just enough JSON for the native tests to read the case files they share with the TypeScript
// tests (test/testdata/rule-cases.json): objects, arrays, strings, integers, true, false, null.
// Strings are bytes: "\u00ff" is the byte 0xff (the case files keep every byte below \u0100), so
// paths that are not UTF-8 are written as they are. A number keeps its text (uint64 and negative
// values alike); a string of digits ("0xffffff9c") reads as a number too. No exceptions: a
// malformed file gives ok == false and a message.
#pragma once
#include <stdint.h>
#include <ctype.h>
#include <stdlib.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace json_value {

struct Value {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  std::string text;  // kNumber: its digits; kString: its bytes
  std::vector<Value> items;
  std::map<std::string, Value> members;

  bool Has(const std::string& key) const { return kind == kObject && members.count(key) != 0; }
  const Value& operator[](const std::string& key) const {
    static const Value none;
    auto it = members.find(key);
    return kind == kObject && it != members.end() ? it->second : none;
  }
  uint64_t U64(uint64_t otherwise = 0) const {
    if (kind != kNumber && kind != kString) return otherwise;
    return text.empty() ? otherwise : text[0] == '-' ? static_cast<uint64_t>(strtoll(text.c_str(), nullptr, 0)) : strtoull(text.c_str(), nullptr, 0);
  }
  int64_t I64(int64_t otherwise = 0) const { return static_cast<int64_t>(U64(static_cast<uint64_t>(otherwise))); }
};

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  bool Parse(Value* out) {
    ok_ = true;
    *out = ParseValue();
    Space();
    if (ok_ && i_ != s_.size()) Fail("trailing text");
    return ok_;
  }
  const std::string& error() const { return error_; }

 private:
  void Fail(const char* what) {
    if (ok_) error_ = std::string(what) + " at byte " + std::to_string(i_);
    ok_ = false;
  }
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  bool Eat(char c) {
    Space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Word(const char* w) {
    const std::string word(w);
    if (s_.compare(i_, word.size(), word) != 0) return false;
    i_ += word.size();
    return true;
  }
  std::string String() {
    std::string out;
    ++i_;  // the opening quote
    while (ok_ && i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) break;
      char e = s_[i_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          const unsigned long code = i_ + 4 <= s_.size() ? strtoul(s_.substr(i_, 4).c_str(), nullptr, 16) : 0x100;
          if (code > 0xff) Fail("a \\u escape above \\u00ff (strings here are bytes)");
          out += static_cast<char>(code);
          i_ += 4;
          break;
        }
        default: out += e;  // \" \\ \/
      }
    }
    if (i_ >= s_.size()) Fail("unterminated string");
    ++i_;
    return out;
  }
  Value ParseValue() {
    Value v;
    if (++depth_ > 64) {
      Fail("nested too deep");
      return v;
    }
    Space();
    if (i_ >= s_.size()) {
      Fail("unexpected end");
    } else if (s_[i_] == '{') {
      ++i_;
      v.kind = Value::kObject;
      while (ok_ && !Eat('}')) {
        if (!v.members.empty() && !Eat(',')) Fail("expected ','");
        Space();
        if (i_ >= s_.size() || s_[i_] != '"') {
          Fail("expected a key");
          break;
        }
        std::string key = String();
        if (!Eat(':')) Fail("expected ':'");
        v.members[key] = ParseValue();
      }
    } else if (s_[i_] == '[') {
      ++i_;
      v.kind = Value::kArray;
      while (ok_ && !Eat(']')) {
        if (!v.items.empty() && !Eat(',')) Fail("expected ','");
        v.items.push_back(ParseValue());
      }
    } else if (s_[i_] == '"') {
      v.kind = Value::kString;
      v.text = String();
    } else if (Word("true") || Word("false")) {
      v.kind = Value::kBool;
      v.boolean = s_[i_ - 1] == 'e' && s_[i_ - 2] == 'u';
    } else if (Word("null")) {
      v.kind = Value::kNull;
    } else {
      const size_t start = i_;
      while (i_ < s_.size() && (isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-')) ++i_;
      if (i_ == start) Fail("unexpected character");
      v.kind = Value::kNumber;
      v.text = s_.substr(start, i_ - start);
    }
    --depth_;
    return v;
  }

  const std::string& s_;
  size_t i_ = 0;
  int depth_ = 0;
  bool ok_ = true;
  std::string error_;
};

}  // namespace json_value
