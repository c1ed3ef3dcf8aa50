// Splitting and unescaping the text of /proc/<pid>/mountinfo, shared by the data plane's freezer
// choice (native/addon/cgroup_paths.cpp) and the helper's mount confinement
// (native/tools/mount_confinement.cpp), which read the same file for different reasons.
#pragma once

#include <string>
#include <vector>

namespace seccomp_agent {

inline std::vector<std::string> SplitText(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) return out;
    start = pos + 1;
  }
}

// mountinfo escapes space, tab, newline and backslash as \ooo; nothing else is an escape.
inline std::string UnescapeMountinfo(const std::string& s) {
  auto octal = [](char c) { return c >= '0' && c <= '7'; };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && octal(s[i + 1]) && octal(s[i + 2]) && octal(s[i + 3])) {
      out.push_back(char((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace seccomp_agent
