#include "handoff_formats.hpp"

#include <cstdlib>

namespace seccomp_agent {
namespace handoff {
namespace {

std::string List(const std::vector<uint32_t>& versions) {
  std::string out = "[";
  for (size_t i = 0; i < versions.size(); i++) out += (i > 0 ? "," : "") + std::to_string(versions[i]);
  return out + "]";
}

bool Has(const std::vector<uint32_t>& versions, uint32_t v) {
  for (uint32_t x : versions) {
    if (x == v) return true;
  }
  return false;
}

// The numbers of `"key":[a,b]` inside `text` (its only array of that name); false when absent or
// not a list of at most 16 unsigned numbers.
bool ReadList(const std::string& text, const std::string& key, std::vector<uint32_t>* out) {
  const std::string needle = "\"" + key + "\":[";
  size_t at = text.find(needle);
  if (at == std::string::npos) return false;
  at += needle.size();
  out->clear();
  for (;;) {
    if (at < text.size() && text[at] == ']') return true;
    size_t digits = at;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') digits++;
    if (digits == at || digits - at > 9 || out->size() == 16) return false;
    out->push_back(static_cast<uint32_t>(std::strtoul(text.substr(at, digits - at).c_str(), nullptr, 10)));
    at = digits;
    if (at < text.size() && text[at] == ',') at++;
    else if (at >= text.size() || text[at] != ']') return false;
  }
}

}  // namespace

std::string HelloText(int pid, const FormatVersions& reads) {
  return "{\"pid\":" + std::to_string(pid) + ",\"reads\":{\"frames\":" + List(reads.frames) + ",\"journal\":" +
         List(reads.journals) + (reads.records.empty() ? "" : ",\"records\":" + List(reads.records)) + "}}";
}

bool ParseHelloReads(const std::string& text, FormatVersions* reads, std::string* error) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') {
    *error = "the successor's hello is not a JSON object";
    return false;
  }
  if (text.find("\"reads\":") == std::string::npos) {
    // A release before 0.2.0: its readers are known.
    reads->frames = {kLegacyFrameVersion};
    reads->journals = {kLegacyJournalVersion};
    return true;
  }
  if (!ReadList(text, "frames", &reads->frames) || !ReadList(text, "journal", &reads->journals)) {
    *error = "the successor's hello names what it reads in a shape this data plane does not know: " + text.substr(0, 200);
    return false;
  }
  // Since 0.2.0; absent (0.1.0): one memfd per container record.
  reads->records.clear();
  if (text.find("\"records\":") != std::string::npos && !ReadList(text, "records", &reads->records)) {
    *error = "the successor's hello names the records it reads in a shape this data plane does not know: " + text.substr(0, 200);
    return false;
  }
  return true;
}

std::string FormatMismatch(const FormatVersions& reads, uint32_t frame_version, uint32_t journal_version) {
  std::string why;
  if (!Has(reads.frames, frame_version)) {
    why = "it reads handoff frame version(s) " + List(reads.frames) + ", this data plane writes " + std::to_string(frame_version);
  }
  if (!Has(reads.journals, journal_version)) {
    why += std::string(why.empty() ? "it" : ", and") + " reads in-flight journal version(s) " + List(reads.journals) +
           ", this data plane writes " + std::to_string(journal_version);
  }
  return why;
}

}  // namespace handoff
}  // namespace seccomp_agent
