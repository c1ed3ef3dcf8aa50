// The command line of the native tools, read one way: the arguments in order, a flag's value (the
// argument after it, or the text after `=`), the command after `--`, and a number as a decimal
// within a range. Each tool keeps its own flags and its own messages. Header-only, no exceptions.
#pragma once
#include <errno.h>
#include <stdlib.h>
#include <string.h>

namespace command_line {

// `text`, all of it, as a decimal from `min` to `max` (0 <= min): digits only, no sign or space
// first. False when it is not one (out untouched). Also what the fd store reads its LISTEN_*
// variables with.
inline bool ParseDecimal(const char* text, long long min, long long max, long long* out) {
  if (text == nullptr || text[0] < '0' || text[0] > '9') return false;
  errno = 0;
  char* end = nullptr;
  const long long v = strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

// The arguments after argv[0], one at a time: `while (args.Next()) { if (args.Is("--x")) ... }`.
// The current argument stays the flag Next moved to, also after Value took the one after it.
class Args {
 public:
  Args(int argc, char** argv) : argc_(argc), argv_(argv) {}
  // Moves to the next argument not yet taken; false when none is left.
  bool Next() {
    if (++at_ >= argc_) return false;
    arg_ = argv_[at_];
    return true;
  }
  // The current argument.
  const char* Arg() const { return arg_; }
  bool Is(const char* flag) const { return strcmp(arg_, flag) == 0; }
  // The argument after the current one, taken as its value; nullptr when none is left.
  const char* Value() { return at_ + 1 < argc_ ? argv_[++at_] : nullptr; }
  // The text after `flag=` when the current argument is `flag=...`; nullptr when it is not.
  const char* Inline(const char* flag) const {
    const size_t len = strlen(flag);
    return strncmp(arg_, flag, len) == 0 && arg_[len] == '=' ? arg_ + len + 1 : nullptr;
  }
  // The arguments after those taken (the command after `--`), all taken: argv's own
  // null-terminated array, so no command is a pointer to nullptr.
  char** Rest() {
    char** rest = argv_ + at_ + 1;
    at_ = argc_;
    return rest;
  }

 private:
  const int argc_;
  char** const argv_;
  int at_ = 0;
  const char* arg_ = "";
};

}  // namespace command_line
