#include "suffixed_path.hpp"

#include <errno.h>
#include <limits.h>

namespace seccomp_agent {

bool ValidSuffix(const std::string& s) {
  return !s.empty() && s.size() <= 255 && s.find('/') == std::string::npos && s.find('\0') == std::string::npos &&
         s.find_first_not_of('.') != std::string::npos;
}

int SuffixedPath(const PathView* path, const std::string& suffix, std::string* out) {
  if (path == nullptr) return EFAULT;
  if (path->truncated) return ENAMETOOLONG;
  std::string p(path->data, path->length);
  if (p.empty()) return ENOENT;
  size_t end = p.find_last_not_of('/');
  // "/", "x/.", "x/..": not a new name, so no suffix; mkdir of the path as given gets the
  // kernel's own answer (EEXIST, or ENOENT/ENOTDIR from the walk).
  if (end == std::string::npos) {
    *out = std::move(p);
    return 0;
  }
  p.resize(end + 1);
  size_t slash = p.rfind('/');
  const std::string last = slash == std::string::npos ? p : p.substr(slash + 1);
  if (last == "." || last == "..") {
    *out = std::string(path->data, path->length);
    return 0;
  }
  p += suffix;
  if (p.size() >= PATH_MAX) return ENAMETOOLONG;
  *out = std::move(p);
  return 0;
}

}  // namespace seccomp_agent
