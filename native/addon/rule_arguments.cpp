#include "rule_arguments.hpp"

#include <errno.h>
#include <limits.h>

namespace seccomp_agent {
namespace {

// Mount's arguments (mount(2), the same positions in i386 and x32): source, target, fstype, flags, data.
constexpr int kMountSource = 0, kMountTarget = 1, kMountFstype = 2, kMountFlags = 3, kMountData = 4;

}  // namespace

const PathView* PathAt(const PathView* views, size_t count, int index) {
  for (size_t i = 0; i < count; ++i) {
    if (views[i].index == index) return &views[i];
  }
  return nullptr;
}

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

int MountFromPaths(const PathView* views, size_t count, const uint64_t* args, bool require_cap_sys_admin, MountArgs* out) {
  const PathView* source = PathAt(views, count, kMountSource);
  const PathView* target = PathAt(views, count, kMountTarget);
  const PathView* fstype = PathAt(views, count, kMountFstype);
  const PathView* data = PathAt(views, count, kMountData);
  if (target == nullptr || fstype == nullptr) return EFAULT;
  if (target->truncated) return ENAMETOOLONG;
  if ((source && source->truncated) || fstype->truncated || (data && data->truncated)) return EINVAL;
  if (source) out->source.assign(source->data, source->length);
  out->target.assign(target->data, target->length);
  out->fstype.assign(fstype->data, fstype->length);
  if (data) out->data.assign(data->data, data->length);
  out->flags = args[kMountFlags];
  out->require_cap_sys_admin = require_cap_sys_admin;
  return 0;
}

}  // namespace seccomp_agent
