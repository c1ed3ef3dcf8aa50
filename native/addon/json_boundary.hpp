// Finds where the runtime's JSON message ends. runc 1.1 keeps the listenerPath connection open
// for the life of `runc run` (it closes it only when it exits), so the agent cannot wait for EOF:
// the message is complete once its top-level object or array closes. Strings and escapes are
// tracked so braces inside them do not count. Anything that does not start with { or [ is left to
// EOF (and then to the JSON parser's error).
#pragma once
#include <cstddef>

class JsonBoundary {
 public:
  // Feeds the next bytes; true once the top-level value has closed.
  bool Feed(const char* data, size_t length) {
    for (size_t i = 0; i < length && !complete_ && !opaque_; i++) Step(data[i]);
    return complete_;
  }

 private:
  void Step(char c) {
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
      return;
    }
    if (depth_ == 0) {
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') return;
      if (c != '{' && c != '[') {
        opaque_ = true;
        return;
      }
    }
    switch (c) {
      case '"':
        in_string_ = true;
        break;
      case '{':
      case '[':
        depth_++;
        break;
      case '}':
      case ']':
        if (--depth_ == 0) complete_ = true;
        break;
      default:
        break;
    }
  }

  long depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  bool complete_ = false;
  bool opaque_ = false;
};
