// Every container's runtime record (JSON from the data plane's JS: what its notify fd belongs to)
// in one memfd, so a container costs the data plane and the fd store one fd (its notify fd), not
// two: at 20,000 open files a process holds 18,750 containers rather than 9,473. Kept in the fd
// store and handed to a successor as "records" (docs/upgrades.md); a successor that does not read
// it (a release before this file) is handed one sealed memfd per container ("r<handle>") instead.
//
// Layout: each record in a region of its own at a 4 KiB-aligned offset, a 16-byte header
// {u32 magic, u32 handle, u32 length, u32 reserved} and then the JSON. Regions are appended; a
// container's removal punches its region's pages out (the memory goes back, the offset is never
// reused), so the file is sparse and a reader finds the records by SEEK_DATA. Never mapped (no RSS).
#pragma once
#include <stdint.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace seccomp_agent {

// The most a record (or a policy, which travels the same way) may hold.
constexpr size_t kMaxRecordBytes = 1024 * 1024;

// Bytes in a sealed memfd, written once and never mapped (costs no RSS): each policy in force
// ("p<handle>"), and each record for a successor that reads no records file (0.1.0's "r<handle>").
bool WriteSealedMemfd(const std::string& bytes, int* fd, std::string* error);
// Reads one back whole; false with *error past kMaxRecordBytes.
bool ReadSealedMemfd(int fd, std::string* bytes, std::string* error);

class RecordFile {
 public:
  static constexpr uint32_t kMagic = 0x43524153;  // "SARC"
  static constexpr size_t kHeaderBytes = 16;
  static constexpr size_t kAlign = 4096;
  // A record's place in the file; offset < 0: none.
  struct Place {
    int64_t offset = -1;
    uint32_t bytes = 0;  // the region's size (header and JSON, rounded up to kAlign)
  };

  // A new, empty file in a new memfd. nullptr with *error.
  static std::unique_ptr<RecordFile> Create(std::string* error);
  // A predecessor's file (takes fd): records are appended after its last one.
  static std::unique_ptr<RecordFile> Open(int fd, std::string* error);
  ~RecordFile();
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  int fd() const { return fd_; }
  // Any thread. Writes `json` (at most kMaxRecordBytes) as `handle`'s record. False with *error.
  bool Append(uint32_t handle, const std::string& json, Place* place, std::string* error);
  // Any thread. `handle`'s record at `place`; false with *error when the region holds another
  // container's, or none.
  bool Read(const Place& place, uint32_t handle, std::string* json, std::string* error) const;
  // Any thread: the region's memory goes back.
  void Release(const Place& place);
  // JS thread, at restore: every record the file holds, by handle (the last one of a handle wins).
  std::map<uint32_t, Place> Scan() const;
  // After a handoff the successor owns the file: nothing is released or written from here on.
  void Detach() { detached_.store(true, std::memory_order_release); }

 private:
  RecordFile(int fd, int64_t end) : fd_(fd), end_(end) {}
  int fd_;
  std::atomic<bool> detached_{false};
  std::mutex mu_;  // guards end_
  int64_t end_;
};

}  // namespace seccomp_agent
