// The format versions of what a data plane hands its successor (docs/upgrades.md, "Formats"): the
// handoff frames (handoff.cpp) and the in-flight journal (journal.hpp). The successor's hello names
// the versions it reads; the serving data plane compares them with what it writes and refuses,
// before it pauses anything, a successor that could not read them (it keeps serving). A hello of a
// release before 0.2.0 carries only its pid: that release reads frame version 1 and journal
// version 2. Container records (JSON, "v":1) and policies (protobuf) only ever grow, read by
// tolerant readers, so they need no check here; where records are kept is negotiated: a hello
// that lists "records" reads the one records file (record_file.hpp), any other gets one memfd per
// container. Pure functions: JS thread and native tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace seccomp_agent {
namespace handoff {

constexpr uint16_t kFrameVersion = 1;
// What a hello without "reads" (a release before 0.2.0) means.
constexpr uint32_t kLegacyFrameVersion = 1;
constexpr uint32_t kLegacyJournalVersion = 2;
// The records file's version (record_file.hpp); a hello without "records" reads none.
constexpr uint32_t kRecordsVersion = 1;

struct FormatVersions {
  std::vector<uint32_t> frames;
  std::vector<uint32_t> journals;
  std::vector<uint32_t> records;  // empty: one memfd per container record ("r<handle>")
  bool ReadsRecordsFile() const {
    for (uint32_t v : records) {
      if (v == kRecordsVersion) return true;
    }
    return false;
  }
};

// This data plane's hello: {"pid":N,"reads":{"frames":[1],"journal":[2],"records":[1]}}.
std::string HelloText(int pid, const FormatVersions& reads);
// What a successor's hello says it reads. False with *error when the text is not a hello.
bool ParseHelloReads(const std::string& text, FormatVersions* reads, std::string* error);
// Why a successor that reads `reads` cannot take what this data plane writes ("" when it can).
std::string FormatMismatch(const FormatVersions& reads, uint32_t frame_version, uint32_t journal_version);

}  // namespace handoff
}  // namespace seccomp_agent
