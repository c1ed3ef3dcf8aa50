#include "cgroup_paths.hpp"

#include "mountinfo_text.h"

namespace seccomp_agent {

void FindCgroupMounts(const std::string& mountinfo, CgroupMount* v2, CgroupMount* freezer) {
  for (const std::string& line : SplitText(mountinfo, '\n')) {
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::vector<std::string> left = SplitText(line.substr(0, dash), ' ');
    std::vector<std::string> right = SplitText(line.substr(dash + 3), ' ');
    if (left.size() < 5 || right.size() < 3) continue;
    CgroupMount m{UnescapeMountinfo(left[3]), UnescapeMountinfo(left[4])};
    if (right[0] == "cgroup2" && v2->mountpoint.empty()) {
      *v2 = m;
    } else if (right[0] == "cgroup" && freezer->mountpoint.empty()) {
      for (const std::string& opt : SplitText(right[2], ',')) {
        if (opt == "freezer") *freezer = m;
      }
    }
  }
}

void ParseCgroups(const std::string& text, std::string* v2, std::string* freezer) {
  for (const std::string& line : SplitText(text, '\n')) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) {
      *v2 = path;
    } else {
      for (const std::string& c : SplitText(controllers, ',')) {
        if (c == "freezer") *freezer = path;
      }
    }
  }
}

bool CgroupContains(const std::string& ancestor, const std::string& path) {
  if (ancestor == "/") return true;
  return path.compare(0, ancestor.size(), ancestor) == 0 && (path.size() == ancestor.size() || path[ancestor.size()] == '/');
}

bool MapToControlFile(const CgroupMount& m, const std::string& path, const char* leaf, std::string* file) {
  if (m.mountpoint.empty() || !CgroupContains(m.root, path)) return false;
  std::string rel = m.root == "/" ? path : path.substr(m.root.size());
  *file = m.mountpoint + rel + "/" + leaf;
  return true;
}

FreezeTarget ChooseFreezer(const std::string& target_cgroups, const std::string& own_cgroups,
                           const std::string& mountinfo, bool (*writable)(const std::string& file)) {
  FreezeTarget t;
  std::string v2, freezer, own_v2, own_freezer;
  ParseCgroups(target_cgroups, &v2, &freezer);
  ParseCgroups(own_cgroups, &own_v2, &own_freezer);
  CgroupMount v2_mount, freezer_mount;
  FindCgroupMounts(mountinfo, &v2_mount, &freezer_mount);
  bool holds_us = false;
  // On a hybrid host the v1 freezer is the one the runtime uses (`runc pause`/`resume`, `runc
  // state` says paused): freeze there so operators see and undo it with their usual tools.
  if (!freezer.empty() && freezer != "/") {
    if (CgroupContains(freezer, own_freezer)) {
      holds_us = true;
    } else if (MapToControlFile(freezer_mount, freezer, "freezer.state", &t.file) && writable(t.file)) {
      t.freeze_value = "FROZEN";
      t.thaw_value = "THAWED";
      return t;
    }
  }
  if (!v2.empty() && v2 != "/") {
    if (CgroupContains(v2, own_v2)) {
      holds_us = true;
    } else if (MapToControlFile(v2_mount, v2, "cgroup.freeze", &t.file) && writable(t.file)) {
      t.freeze_value = "1";
      t.thaw_value = "0";
      return t;
    }
  }
  t.file.clear();
  t.refusal = holds_us ? "the target's cgroup also holds the data plane" : "no freezable cgroup (root cgroup or no freezer)";
  return t;
}

}  // namespace seccomp_agent
