#include "record_file.hpp"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace seccomp_agent {
namespace {

std::string Errno(const std::string& what) { return what + ": " + strerror(errno); }

int64_t RoundUp(int64_t n) { return (n + int64_t(RecordFile::kAlign) - 1) / int64_t(RecordFile::kAlign) * int64_t(RecordFile::kAlign); }

bool PreadAll(int fd, void* buf, size_t n, int64_t at) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = pread(fd, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(at + int64_t(done)));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += size_t(got);
  }
  return true;
}

bool PwriteAll(int fd, const void* buf, size_t n, int64_t at) {
  size_t done = 0;
  while (done < n) {
    const ssize_t put = pwrite(fd, static_cast<const char*>(buf) + done, n - done, static_cast<off_t>(at + int64_t(done)));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    done += size_t(put);
  }
  return true;
}

struct Header {
  uint32_t magic;
  uint32_t handle;
  uint32_t length;
  uint32_t reserved;
};
static_assert(sizeof(Header) == RecordFile::kHeaderBytes, "the header is 16 bytes");

}  // namespace

std::unique_ptr<RecordFile> RecordFile::Create(std::string* error) {
  const int fd = memfd_create("seccomp-agent-records", MFD_CLOEXEC);
  if (fd < 0) {
    *error = Errno("memfd_create of the container records");
    return nullptr;
  }
  return std::unique_ptr<RecordFile>(new RecordFile(fd, 0));
}

std::unique_ptr<RecordFile> RecordFile::Open(int fd, std::string* error) {
  const off_t end = lseek(fd, 0, SEEK_END);
  if (end < 0) {
    *error = Errno("the container records: lseek");
    close(fd);
    return nullptr;
  }
  const int flags = fcntl(fd, F_GETFD);
  if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  return std::unique_ptr<RecordFile>(new RecordFile(fd, RoundUp(end)));
}

RecordFile::~RecordFile() { close(fd_); }

bool RecordFile::Append(uint32_t handle, const std::string& json, Place* place, std::string* error) {
  if (json.size() > kMaxRecordBytes) {
    *error = "a container record over 1 MiB";
    return false;
  }
  if (detached_.load(std::memory_order_acquire)) {
    *error = "the container records were handed over";
    return false;
  }
  const int64_t bytes = RoundUp(int64_t(kHeaderBytes + json.size()));
  int64_t at;
  {
    std::lock_guard<std::mutex> lock(mu_);
    at = end_;
    end_ += bytes;
  }
  // The JSON first and the header after it: a reader trusts a region only by its header, so a
  // write cut short by a crash leaves none to trust.
  const Header header{kMagic, handle, uint32_t(json.size()), 0};
  if (!PwriteAll(fd_, json.data(), json.size(), at + int64_t(kHeaderBytes)) || !PwriteAll(fd_, &header, sizeof header, at)) {
    *error = Errno("write of a container record");
    Release(Place{at, uint32_t(bytes)});
    return false;
  }
  place->offset = at;
  place->bytes = uint32_t(bytes);
  return true;
}

bool RecordFile::Read(const Place& place, uint32_t handle, std::string* json, std::string* error) const {
  Header header;
  if (place.offset < 0 || !PreadAll(fd_, &header, sizeof header, place.offset) || header.magic != kMagic || header.handle != handle ||
      header.length > kMaxRecordBytes || kHeaderBytes + header.length > place.bytes) {
    *error = "no record of container handle " + std::to_string(handle) + " where it was written";
    return false;
  }
  json->resize(header.length);
  if (header.length > 0 && !PreadAll(fd_, &(*json)[0], header.length, place.offset + int64_t(kHeaderBytes))) {
    *error = Errno("read of a container record");
    return false;
  }
  return true;
}

void RecordFile::Release(const Place& place) {
  if (place.offset < 0 || place.bytes == 0 || detached_.load(std::memory_order_acquire)) return;
  // Keeps the size: a later region's offset stays past the end a successor reads.
  fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(place.offset), static_cast<off_t>(place.bytes));
}

std::map<uint32_t, RecordFile::Place> RecordFile::Scan() const {
  std::map<uint32_t, Place> found;
  const off_t size = lseek(fd_, 0, SEEK_END);
  off_t at = 0;
  while (size > 0 && at < size) {
    // Only the pages that exist: a punched region is a hole, and reading one would allocate it.
    off_t data = lseek(fd_, at, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;
    if (data < 0) data = at;  // no SEEK_DATA here: every page is looked at
    data = data / off_t(kAlign) * off_t(kAlign);
    Header header;
    if (!PreadAll(fd_, &header, sizeof header, data)) break;
    const int64_t bytes = RoundUp(int64_t(kHeaderBytes) + int64_t(header.length));
    if (header.magic == kMagic && header.length <= kMaxRecordBytes && data + bytes <= RoundUp(size)) {
      found[header.handle] = Place{int64_t(data), uint32_t(bytes)};
      at = data + off_t(bytes);
    } else {
      at = data + off_t(kAlign);
    }
  }
  return found;
}

bool WriteSealedMemfd(const std::string& bytes, int* fd, std::string* error) {
  int memfd = memfd_create("seccomp-agent-container", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (memfd < 0) {
    *error = Errno("memfd_create of a container record");
    return false;
  }
  if (!PwriteAll(memfd, bytes.data(), bytes.size(), 0)) {
    *error = Errno("write of a container record");
    close(memfd);
    return false;
  }
  // Nobody changes it afterwards, not even by mistake.
  fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  *fd = memfd;
  return true;
}

bool ReadSealedMemfd(int fd, std::string* bytes, std::string* error) {
  // Read to its end with no fstat for the size: a record or policy is a few hundred bytes, one
  // pread reads it whole, and a successor reads 1,000 of them in a row.
  bytes->resize(4096);
  size_t done = 0;
  for (;;) {
    if (done == bytes->size()) {
      if (done > kMaxRecordBytes) {
        *error = "a container record over 1 MiB";
        return false;
      }
      bytes->resize(std::min(bytes->size() * 2, kMaxRecordBytes + 1));
    }
    const ssize_t n = pread(fd, &(*bytes)[done], bytes->size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = Errno("read of a container record");
      return false;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
    if (done < bytes->size()) break;  // a short read of a memfd is its end: no second read for the 0
  }
  bytes->resize(done);
  return true;
}

}  // namespace seccomp_agent
