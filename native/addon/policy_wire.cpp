#include "policy_wire.hpp"

#include <string.h>

#include "rule_arguments.hpp"

namespace seccomp_agent {
namespace {

// The protobuf wire format, as far as policy.proto uses it: varints and length-delimited fields
// (no groups, no fixed-width numbers). Every read is bounds-checked; a malformed message is
// `ok = false`, never a crash.
class WireReader {
 public:
  WireReader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}

  bool Done() const { return p_ == end_ || !ok; }

  // Next field's number and wire type; false at the end or on a malformed tag.
  bool Next(uint32_t* field, uint32_t* type) {
    if (p_ == end_ || !ok) return false;
    uint64_t tag = Varint();
    *field = static_cast<uint32_t>(tag >> 3);
    *type = static_cast<uint32_t>(tag & 7);
    if (*field == 0) ok = false;
    return ok;
  }

  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) break;
      uint8_t b = *p_++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }

  // A length-delimited field's bytes.
  bool Bytes(const uint8_t** data, size_t* size) {
    uint64_t n = Varint();
    if (!ok || n > static_cast<uint64_t>(end_ - p_)) return ok = false;
    *data = p_;
    *size = static_cast<size_t>(n);
    p_ += n;
    return true;
  }

  std::string String() {
    const uint8_t* d = nullptr;
    size_t n = 0;
    if (!Bytes(&d, &n)) return std::string();
    return std::string(reinterpret_cast<const char*>(d), n);
  }

  // Skips a field of a type this reader does not expect (a newer control plane's addition).
  void Skip(uint32_t type) {
    const uint8_t* d;
    size_t n;
    if (type == 0) Varint();
    else if (type == 2) Bytes(&d, &n);
    else if (type == 1 && end_ - p_ >= 8) p_ += 8;
    else if (type == 5 && end_ - p_ >= 4) p_ += 4;
    else ok = false;
  }

  bool ok = true;

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

bool Refuse(PolicyNack* nack, int rule, const char* reason, std::string detail) {
  nack->rule_index = rule;
  nack->reason = reason;
  nack->detail = std::move(detail);
  return false;
}

// Reads the sub-message of a length-delimited field into a reader of its own.
bool SubReader(WireReader& r, WireReader* sub) {
  const uint8_t* d = nullptr;
  size_t n = 0;
  if (!r.Bytes(&d, &n)) return false;
  *sub = WireReader(d, n);
  return true;
}

// One varint field `field` of a small message (ErrnoRuleAction.errno, ...); 0 when absent.
uint64_t OnlyVarint(WireReader& r, uint32_t wanted) {
  WireReader sub(nullptr, 0);
  if (!SubReader(r, &sub)) return 0;
  uint64_t v = 0;
  uint32_t field, type;
  while (sub.Next(&field, &type)) {
    if (field == wanted && type == 0) v = sub.Varint();
    else sub.Skip(type);
  }
  if (!sub.ok) r.ok = false;
  return v;
}

// An emulation's action message: field 1 as its row's payload says.
void ReadPayload(WireReader& a, RulePayload payload, Rule* rule) {
  switch (payload) {
    case RulePayload::kNothing: a.Skip(2); break;
    case RulePayload::kSuffix: {
      WireReader m(nullptr, 0);
      if (!SubReader(a, &m)) break;
      uint32_t f, t;
      while (m.Next(&f, &t)) {
        if (f == 1 && t == 2) rule->suffix = m.String();
        else m.Skip(t);
      }
      if (!m.ok) a.ok = false;
      break;
    }
    case RulePayload::kCapSysAdmin: rule->require_cap_sys_admin = OnlyVarint(a, 1) != 0; break;
    case RulePayload::kErrno: rule->value = static_cast<int64_t>(OnlyVarint(a, 1)); break;
  }
}

bool ReadAction(WireReader& r, Rule* rule, int index, PolicyNack* nack) {
  WireReader a(nullptr, 0);
  if (!SubReader(r, &a)) return Refuse(nack, index, "malformed", "the action is not a valid message");
  int actions = 0;
  uint32_t field, type;
  while (a.Next(&field, &type)) {
    // 1-3 and 8: continue, error, value, ask; the others each an emulation's row (or unknown: skipped).
    const bool known = (field >= 1 && field <= 3) || field == 8 || EmulationOfRuleAction(field) != nullptr;
    if (type != 2 || !known) {
      a.Skip(type);
      continue;
    }
    ++actions;
    switch (field) {
      case 1: rule->kind = RuleKind::kContinue; a.Skip(type); break;
      case 2: rule->kind = RuleKind::kError; rule->value = static_cast<int64_t>(OnlyVarint(a, 1)); break;
      case 3: rule->kind = RuleKind::kValue; rule->value = static_cast<int64_t>(OnlyVarint(a, 1)); break;
      case 8: rule->kind = RuleKind::kAsk; a.Skip(type); break;
      default: {
        // An emulation: its row says what its action message carries.
        const EmulationRow* row = EmulationOfRuleAction(field);
        rule->kind = RuleKind::kEmulate;
        rule->emulated = row->kind;
        ReadPayload(a, row->payload, rule);
        break;
      }
    }
  }
  if (!a.ok) return Refuse(nack, index, "malformed", "the action is not a valid message");
  if (actions != 1) return Refuse(nack, index, "no-action", actions == 0 ? "the rule has no action" : "the rule has more than one action");
  return true;
}

bool ReadMatcher(WireReader& r, bool path, Rule* rule, int index, PolicyNack* nack) {
  WireReader m(nullptr, 0);
  if (!SubReader(r, &m)) return Refuse(nack, index, "malformed", "a matcher is not a valid message");
  uint64_t arg = 0, op = 0, value = 0, value_two = 0;
  std::string bytes;
  uint32_t field, type;
  while (m.Next(&field, &type)) {
    if (type == 0 && field == 1) arg = m.Varint();
    else if (type == 0 && field == 2) op = m.Varint();
    else if (!path && type == 0 && field == 3) value = m.Varint();
    else if (!path && type == 0 && field == 4) value_two = m.Varint();
    else if (path && type == 2 && field == 3) bytes = m.String();
    else m.Skip(type);
  }
  if (!m.ok) return Refuse(nack, index, "malformed", "a matcher is not a valid message");
  if (arg > 5) return Refuse(nack, index, "bad-matcher", "argument index " + std::to_string(arg) + " (0 to 5)");
  if (path) {
    if (op < 1 || op > 2) return Refuse(nack, index, "bad-matcher", "path op " + std::to_string(op) + " (EQUAL or PREFIX)");
    if (bytes.size() > kPolicyMaxString) return Refuse(nack, index, "too-large", "a path matcher over 4096 bytes");
    rule->paths.push_back(PathMatch{static_cast<uint8_t>(arg), static_cast<PathOp>(op), std::move(bytes)});
  } else {
    if (op < 1 || op > 7) return Refuse(nack, index, "bad-matcher", "arg op " + std::to_string(op) + " (EQ to MASKED_EQ)");
    rule->args.push_back(ArgMatch{static_cast<uint8_t>(arg), static_cast<ArgOp>(op), value, value_two});
  }
  if (rule->args.size() + rule->paths.size() > kPolicyMaxMatchers) return Refuse(nack, index, "too-large", "more than 16 matchers");
  return true;
}

// What only a whole rule can tell: the action fits its syscalls and matchers.
bool CheckRule(const Rule& rule, int index, PolicyNack* nack) {
  const EmulationRow* row = rule.kind == RuleKind::kEmulate ? EmulationOf(rule.emulated) : nullptr;
  const RulePayload payload = row != nullptr ? row->payload : RulePayload::kNothing;
  const bool errno_payload = payload == RulePayload::kErrno;
  if ((rule.kind == RuleKind::kError || errno_payload) && (rule.value < (errno_payload ? 0 : 1) || rule.value > 4095)) {
    return Refuse(nack, index, "bad-errno", "errno " + std::to_string(rule.value) + " (1 to 4095)");
  }
  // An emulation that answers only some syscalls needs a rule that names only those.
  if (row != nullptr && !AnswersAnySyscall(*row)) {
    bool only = !rule.any_syscall;
    for (int nr = 0; nr < kCanonicalSyscallLimit && only; ++nr) {
      if (rule.syscalls.test(static_cast<size_t>(nr)) && EmulatedCallOf(*row, nr) == nullptr) only = false;
    }
    if (!only) {
      const std::string names = EmulatedSyscallNames(*row, " and/or ");
      const bool several = names.find(' ') != std::string::npos;
      return Refuse(nack, index, "wrong-syscall",
                    std::string("a ") + row->name + " action needs syscall" + (several ? "s " : " ") + names + " only");
    }
  }
  if (payload == RulePayload::kSuffix) {
    if (!ValidSuffix(rule.suffix)) {
      return Refuse(nack, index, "bad-suffix", std::string("a ") + row->name + " suffix is a plain name part: 1 to 255 bytes, no '/', no NUL, not only dots");
    }
  }
  for (const PathMatch& m : rule.paths) {
    for (int nr = 0; nr < kCanonicalSyscallLimit && !rule.any_syscall; ++nr) {
      if (rule.syscalls.test(static_cast<size_t>(nr)) && !(PathArgMask(nr) & (1u << m.index))) {
        const char* name = CanonicalName(nr);
        return Refuse(nack, index, "bad-matcher",
                      "argument " + std::to_string(m.index) + " of syscall " + (name != nullptr ? name : std::to_string(nr)) +
                          " is not a path the data plane reads");
      }
    }
  }
  return true;
}

bool ReadRule(WireReader& r, int index, Rule* rule, PolicyNack* nack) {
  WireReader m(nullptr, 0);
  if (!SubReader(r, &m)) return Refuse(nack, index, "malformed", "the rule is not a valid message");
  bool has_action = false;
  uint32_t field, type;
  while (m.Next(&field, &type)) {
    if (field == 1 && type == 2) {
      std::string name = m.String();
      // A name covers that call in every ABI the filter lets through (syscall_abi.h).
      int nr = SyscallNumberNamed(name);
      if (nr < 0) {
        return Refuse(nack, index, "unknown-syscall", "syscall \"" + name.substr(0, 64) + "\" is not an x86_64, i386 or x32 syscall name");
      }
      rule->any_syscall = false;
      rule->syscalls.set(static_cast<size_t>(nr));
    } else if ((field == 2 || field == 3) && type == 2) {
      if (!ReadMatcher(m, field == 3, rule, index, nack)) return false;
    } else if (field == 4 && type == 2) {
      if (has_action) return Refuse(nack, index, "no-action", "the rule has more than one action");
      if (!ReadAction(m, rule, index, nack)) return false;
      has_action = true;
    } else if (field == 5 && type == 2) {
      rule->origin = m.String().substr(0, 256);
    } else {
      m.Skip(type);
    }
  }
  if (!m.ok) return Refuse(nack, index, "malformed", "the rule is not a valid message");
  if (!has_action) return Refuse(nack, index, "no-action", "the rule has no action");
  return CheckRule(*rule, index, nack);
}

bool ReadLabel(WireReader& r, RuleSet* out, PolicyNack* nack) {
  WireReader e(nullptr, 0);
  if (!SubReader(r, &e)) return Refuse(nack, -1, "malformed", "a label is not a valid map entry");
  std::string key, value;
  uint32_t field, type;
  while (e.Next(&field, &type)) {
    if (field == 1 && type == 2) key = e.String();
    else if (field == 2 && type == 2) value = e.String();
    else e.Skip(type);
  }
  if (!e.ok) return Refuse(nack, -1, "malformed", "a label is not a valid map entry");
  if (key.size() > 256 || value.size() > kPolicyMaxString) return Refuse(nack, -1, "too-large", "a label key over 256 bytes or value over 4096");
  out->labels[key] = value;
  if (out->labels.size() > kPolicyMaxLabels) return Refuse(nack, -1, "too-large", "more than 64 labels");
  return true;
}

}  // namespace

int SyscallNumberNamed(const std::string& name) {
  if (name.find('\0') != std::string::npos) return -1;
  return CanonicalNrNamed(name.c_str());
}

bool ParseContainerPolicy(const uint8_t* data, size_t size, uint64_t* handle, RuleSet* out, PolicyNack* nack) {
  if (size > kPolicyMaxBytes) return Refuse(nack, -1, "too-large", "a policy over 1 MiB");
  WireReader r(data, size);
  *handle = 0;
  uint32_t field, type;
  while (r.Next(&field, &type)) {
    if (field == 1 && type == 0) {
      *handle = r.Varint();
    } else if (field == 2 && type == 2) {
      out->version = r.String();
    } else if (field == 3 && type == 2) {
      if (out->rules.size() == kPolicyMaxRules) return Refuse(nack, -1, "too-large", "more than 1024 rules");
      out->rules.emplace_back();
      if (!ReadRule(r, static_cast<int>(out->rules.size() - 1), &out->rules.back(), nack)) return false;
    } else if (field == 4 && type == 2) {
      if (!ReadLabel(r, out, nack)) return false;
    } else {
      r.Skip(type);
    }
  }
  if (!r.ok) return Refuse(nack, -1, "malformed", "not a valid ContainerPolicy message");
  if (out->version.empty() || out->version.size() > 256) return Refuse(nack, -1, "bad-version", "the version is empty or over 256 bytes");
  return true;
}

}  // namespace seccomp_agent
