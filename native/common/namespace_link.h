// A namespace file's link text ("mnt:[4026531841]") and the inode it names: one readlink, where a
// stat would open the nsfs inode behind the link (twice the cost on an SRSO-mitigated VM). The
// addon (helper keys) and the emulation helper (the target's user namespace) share it.
#pragma once
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

// Namespace link texts are short ("cgroup:[4026531835]"): this holds any of them, NUL-terminated.
struct NamespaceLinkText {
  char text[48] = {};
};

// Reads the link `path` (relative to `dirfd`, or AT_FDCWD) into `out`; false when it is gone.
inline bool ReadNamespaceLink(int dirfd, const char* path, NamespaceLinkText* out) {
  const ssize_t n = readlinkat(dirfd, path, out->text, sizeof out->text - 1);
  if (n <= 0) return false;
  out->text[n] = '\0';
  return true;
}

// The inode in a link's text ("mnt:[4026531841]" -> 4026531841); 0 when it has none.
inline uint64_t NamespaceInode(const NamespaceLinkText& link) {
  const char* open = link.text;
  while (*open != '\0' && *open != '[') ++open;
  unsigned long long inode = 0;
  return *open == '[' && sscanf(open, "[%llu]", &inode) == 1 ? uint64_t(inode) : 0;
}
