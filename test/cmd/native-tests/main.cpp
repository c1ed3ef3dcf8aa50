// Unit tests of the native core's pure pieces: the pending table (on a real seccomp notify fd, with
// a real target blocked in getppid), the decision check, the rule table, the runtime message's
// JSON boundary, the fd-store names, the cgroup path parsing that picks a container's freezer and
// the tally of unwatched native answers, and the helper's reading of /proc/<pid>/status.
// No framework: each case prints "ok N - name" or
// "not ok N - name" with what differed, and the last line is "N passed, N failed"; the exit code
// is 1 when anything failed. Run by test/unit/native-core.test.ts (npm test).
// With --encode-events it prints a batch of every kind of event as the encoder writes it (see
// SampleBatch), for dataplane/event-decoder.test.ts to decode.
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <limits.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "answer_tally.hpp"
#include "nshelper_answer.hpp"
#include "cgroup_paths.hpp"
#include "decision_check.hpp"
#include "emulation_table.hpp"
#include "engine_names.hpp"
#include "event_encoder.hpp"
#include "event_layout.hpp"
#include "handoff_formats.hpp"
#include "journal.hpp"
#include "record_file.hpp"
#include "namespace_link.h"
#include "json_boundary.hpp"
#include "mount_namespace_cache.hpp"
#include "notify_fd.hpp"
#include "nshelper_target.hpp"
#include "pending_table.hpp"
#include "rule_table.hpp"
#include "rule_set.hpp"
#include "rule_arguments.hpp"
#include "json_value.hpp"
#include <linux/audit.h>
#include "scm_rights.h"
#include "seccomp_compat.h"
#include "tsc_clock.h"
#include "wake_mode.hpp"

using namespace seccomp_agent;

namespace {

int g_passed = 0;
int g_failed = 0;
std::vector<std::string> g_problems;  // of the running case

#define EXPECT(cond)                                                                              \
  do {                                                                                            \
    if (!(cond)) g_problems.push_back(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond); \
  } while (0)

void Case(const char* name, const std::function<void()>& body) {
  g_problems.clear();
  body();
  const int n = g_passed + g_failed + 1;
  if (g_problems.empty()) {
    g_passed++;
    printf("ok %d - %s\n", n, name);
  } else {
    g_failed++;
    printf("not ok %d - %s\n", n, name);
    for (const std::string& p : g_problems) printf("#   %s\n", p.c_str());
  }
  fflush(stdout);
}

// A child process under a filter that notifies getppid; it calls getppid `calls` times and writes
// each result (the return value, or -errno) to a pipe. The parent holds the listener fd.
struct Target {
  pid_t pid = -1;
  int notify_fd = -1;
  int results = -1;  // read end

  bool Start(int calls) {
    int sv[2], pipefd[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || pipe2(pipefd, O_CLOEXEC) != 0) return false;
    pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      close(sv[0]);
      close(pipefd[0]);
      struct sock_filter prog[] = {
          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      };
      struct sock_fprog fprog = {static_cast<unsigned short>(sizeof prog / sizeof prog[0]), prog};
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(2);
      long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fprog);
      if (fd < 0) _exit(3);
      char byte = 0;
      struct iovec iov = {&byte, 1};
      int listener = static_cast<int>(fd);
      if (scm_rights::Send(sv[1], &iov, 1, &listener, 1, 0) != 1) _exit(4);
      close(listener);
      for (int i = 0; i < calls; i++) {
        long r = syscall(SYS_getppid);
        long value = r < 0 ? -errno : r;
        if (write(pipefd[1], &value, sizeof value) != sizeof value) _exit(5);
      }
      _exit(0);
    }
    close(sv[1]);
    close(pipefd[1]);
    results = pipefd[0];
    char byte;
    struct iovec iov = {&byte, 1};
    std::vector<int> fds;
    bool truncated = false;
    ssize_t n = scm_rights::Receive(sv[0], &iov, 1, 0, &fds, &truncated);
    close(sv[0]);
    if (n != 1 || fds.size() != 1) return false;
    notify_fd = fds[0];
    return true;
  }
  // The next notification (blocks until the child is in getppid).
  bool Next(NotifyBuffers* buffers, Notification* n, uint32_t handle) {
    if (!NotifyRecv(notify_fd, buffers)) return false;
    *n = NotificationFromKernel(*buffers->notif(), handle, MonotonicNs());
    return true;
  }
  long Result() {
    long value = 0;
    if (read(results, &value, sizeof value) != sizeof value) return -10000;
    return value;
  }
  ~Target() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (notify_fd >= 0) close(notify_fd);
    if (results >= 0) close(results);
  }
};

// Records what the table tells the sessions' side.
struct Owners : PendingTable::Owners {
  std::vector<uint64_t> released;
  bool OwnerReleased(PendingOwner* owner) override {
    released.push_back(owner->id);
    return owner->owned == 0;
  }
};

Answer Continue() { return Answer(); }
Answer Errno(int e) {
  Answer a;
  a.kind = Answer::kError;
  a.error = e;
  return a;
}
Answer Value(int64_t v) {
  Answer a;
  a.kind = Answer::kValue;
  a.value = v;
  return a;
}

Notification Fake(uint32_t handle, uint64_t id) {
  Notification n;
  n.handle = handle;
  n.id = id;
  n.nr = SYS_getppid;
  n.arch = AUDIT_ARCH_X86_64;
  n.received_ns = MonotonicNs();
  return n;
}

// One pending target (an eventfd, not a notify fd: only deadlines matter) with one owner, for the
// deadline cases: adds owned notifications due some ns after `now` and notes what expires.
struct DeadlineFixture {
  Owners owners;
  PendingTarget target;
  PendingOwner owner;
  PendingTable table{&owners};
  NotifyBuffers buffers;
  const uint64_t now = MonotonicNs();
  std::vector<uint64_t> expired;  // ids ExpireAt answered, in order
  DeadlineFixture() {
    target.fd = eventfd(0, EFD_CLOEXEC);
    target.handle = 5;
    owner.id = 9;
  }
  ~DeadlineFixture() { close(target.fd); }
  // Notification `id` of the target, owned, due at now + `due_in`.
  void Add(uint64_t id, uint64_t due_in) { table.Add(&target, &owner, Fake(5, id), now + due_in); }
  // Answers what is due at now + `at` with `answer`.
  void ExpireAt(uint64_t at, const Answer& answer) {
    table.ExpireDue(now + at, answer, &buffers,
                    [this](const PendingTable::Answered& a) { expired.push_back(a.entry.notification.id); });
  }
};

// A new in-flight journal; a failed Create fails the case (and gives null).
std::unique_ptr<InFlightJournal> NewJournal() {
  std::string error;
  std::unique_ptr<InFlightJournal> journal = InFlightJournal::Create(&error);
  EXPECT(journal != nullptr);
  return journal;
}

// Bytes of memory the journal's memfd holds (its allocated pages).
long long JournalBytes(const InFlightJournal& journal) {
  struct stat st;
  return fstat(journal.fd(), &st) == 0 ? static_cast<long long>(st.st_blocks) * 512 : -1;
}

void JournalCases() {
  Case("journal: a new journal holds only the pages it writes, and a successor's Open reads no hole (finds a slot 50 pages in)", [] {
    auto journal = NewJournal();
    if (journal == nullptr) return;
    // The header's page: reading every free slot used to allocate all 6 MiB.
    EXPECT(JournalBytes(*journal) <= 8192);
    EXPECT(journal->AddContainer(11) != InFlightJournal::kNoSlot);
    std::vector<uint32_t> slots;
    for (uint64_t id = 1; id <= 2000; id++) slots.push_back(journal->AddInFlight(Fake(11, id)));
    for (size_t i = 0; i + 1 < slots.size(); i++) journal->ReleaseInFlight(slots[i]);
    const long long written = JournalBytes(*journal);
    EXPECT(written > 8192 && written < 512 * 1024);
    std::string error;
    auto successor = InFlightJournal::Open(dup(journal->fd()), &error);
    EXPECT(successor != nullptr);
    if (successor == nullptr) return;
    EXPECT(JournalBytes(*successor) == written);
    const std::vector<InFlightJournal::Entry> entries = successor->InFlightEntries();
    EXPECT(entries.size() == 1 && entries[0].notification.id == 2000 && entries[0].notification.handle == 11);
    EXPECT(successor->ContainerMarks().size() == 1);
    successor->ClearInFlight();
    EXPECT(successor->InFlightEntries().empty());
    EXPECT(JournalBytes(*successor) == written);
    // Its free list hands out the low slots again, not a hole's slot before them.
    EXPECT(successor->AddInFlight(Fake(11, 2001)) == slots[0]);
  });
}

void PendingTableCases() {
  Case("pending table: settle answers the real target, frees its journal slot, its target's and owner's counts", [] {
    auto journal = NewJournal();
    if (journal == nullptr) return;
    Owners owners;
    PendingTable table(&owners);
    table.SetJournal(journal.get());
    Target target;
    EXPECT(target.Start(2));
    PendingTarget t;
    t.fd = target.notify_fd;
    t.handle = 7;
    PendingOwner owner;
    owner.id = 3;
    NotifyBuffers buffers;
    Notification n;
    EXPECT(target.Next(&buffers, &n, 7));
    table.Add(&t, &owner, n, n.received_ns + 1000000000ull);
    EXPECT(table.size() == 1 && t.pending_count == 1 && owner.owned == 1);
    EXPECT(journal->InFlightEntries().size() == 1);
    const PendingTable::Answered a = table.Settle(7, n.id, Value(4242), Continue(), &buffers);
    EXPECT(a.result == SendResult::kOk);
    EXPECT(a.sent.kind == Answer::kValue && a.sent.value == 4242);
    EXPECT(a.drained);
    EXPECT(target.Result() == 4242);
    EXPECT(table.empty() && t.pending_count == 0 && owner.owned == 0);
    EXPECT(owners.released.size() == 1 && owners.released[0] == 3);
    EXPECT(journal->InFlightEntries().empty());
    // The second call: an errno answer.
    EXPECT(target.Next(&buffers, &n, 7));
    table.Add(&t, &owner, n, n.received_ns + 1000000000ull);
    table.Settle(7, n.id, Errno(EACCES), Continue(), &buffers);
    EXPECT(target.Result() == -EACCES);
  });

  Case("pending table: an answer the kernel refuses is replaced by the fallback, and the slot is still released", [] {
    auto journal = NewJournal();
    Owners owners;
    PendingTable table(&owners);
    table.SetJournal(journal.get());
    PendingTarget t;
    t.fd = eventfd(0, EFD_CLOEXEC);  // not a notify fd: every NOTIF_SEND fails with ENOTTY
    t.handle = 1;
    table.Add(&t, nullptr, Fake(1, 9), MonotonicNs() + 1000000000ull);
    NotifyBuffers buffers;
    const PendingTable::Answered a = table.Settle(1, 9, Errno(EPERM), Continue(), &buffers);
    EXPECT(a.result == SendResult::kFailed);
    EXPECT(a.err == ENOTTY);
    EXPECT(a.sent.kind == Answer::kContinue);
    EXPECT(!a.drained && owners.released.empty());  // held: nobody owned it
    EXPECT(journal->InFlightEntries().empty());
    close(t.fd);
  });

  Case("pending table: settle-all and settle-owned-by release every owner (the drift AnswerAllPendingLocked had)", [] {
    Owners owners;
    PendingTable table(&owners);
    Target target;
    EXPECT(target.Start(1));
    PendingTarget t;
    t.fd = target.notify_fd;  // ids below were never delivered: NOTIF_SEND says ENOENT (gone)
    t.handle = 2;
    PendingOwner a, b;
    a.id = 1;
    b.id = 2;
    const uint64_t far = MonotonicNs() + 60000000000ull;
    table.Add(&t, &a, Fake(2, 100), far);
    table.Add(&t, &a, Fake(2, 101), far);
    table.Add(&t, &b, Fake(2, 102), far);
    table.Add(&t, nullptr, Fake(2, 103), far);
    NotifyBuffers buffers;
    std::vector<uint64_t> reported;
    size_t n = table.SettleOwnedBy(&a, Continue(), &buffers, [&](const PendingTable::Answered& r) {
      reported.push_back(r.entry.notification.id);
      EXPECT(r.result == SendResult::kGone);
    });
    EXPECT(n == 2 && reported.size() == 2 && a.owned == 0 && table.size() == 2);
    EXPECT(owners.released.size() == 2);
    n = table.SettleAll(Continue(), &buffers, [&](const PendingTable::Answered& r) { reported.push_back(r.entry.notification.id); });
    EXPECT(n == 2 && table.empty() && t.pending_count == 0 && b.owned == 0);
    // Every owned entry told its owner, the held one nobody.
    EXPECT(owners.released.size() == 3 && owners.released[2] == 2);
  });

  Case("pending table: deadlines answer what is due, skip what was answered, and make later decisions late", [] {
    DeadlineFixture f;
    PendingTable& table = f.table;
    f.Add(1, 10);
    f.Add(2, 20);
    f.Add(3, 1000000000000ull);
    table.Settle(5, 2, Continue(), Continue(), &f.buffers);  // answered before its deadline
    EXPECT(table.NextDeadline() == f.now + 10);
    f.ExpireAt(100, Errno(EPERM));
    EXPECT(f.expired.size() == 1 && f.expired[0] == 1);
    EXPECT(table.AnsweredLate(5, 1) && !table.AnsweredLate(5, 2) && !table.AnsweredLate(5, 3));
    EXPECT(table.size() == 1 && f.owner.owned == 1);
    EXPECT(table.NextDeadline() == f.now + 1000000000000ull);
  });

  Case("pending table: an extended deadline (a hold) is not answered at the old one, and is at the new one", [] {
    DeadlineFixture f;
    PendingTable& table = f.table;
    const uint64_t now = f.now;
    f.Add(1, 10);
    f.Add(2, 10);
    EXPECT(table.Extend(5, 1, now + 500));
    EXPECT(!table.Extend(5, 99, now + 500));  // not pending
    EXPECT(table.Extend(5, 2, now + 5));      // never earlier: stays at now + 10
    f.ExpireAt(100, Continue());
    EXPECT(f.expired.size() == 1 && f.expired[0] == 2);
    EXPECT(table.size() == 1 && table.Find(5, 1) != nullptr);
    EXPECT(table.NextDeadline() == now + 500);  // its item came back at the later deadline
    f.ExpireAt(499, Continue());
    EXPECT(f.expired.size() == 1);
    f.ExpireAt(500, Continue());
    EXPECT(f.expired.size() == 2 && f.expired[1] == 1 && table.empty());
  });

  Case("pending table: a closed target's entries go without an answer; held ones go to the first owner", [] {
    auto journal = NewJournal();
    Owners owners;
    PendingTable table(&owners);
    table.SetJournal(journal.get());
    PendingTarget gone, kept;
    gone.fd = -1;
    gone.handle = 1;
    kept.fd = -1;
    kept.handle = 2;
    const uint64_t far = MonotonicNs() + 60000000000ull;
    HeldStrings held;
    held.count = 1;
    held.strings[0].index = 0;
    held.strings[0].text.length = 4;
    held.blob = "/tmp";
    table.Add(&gone, nullptr, Fake(1, 1), far);
    table.Add(&kept, nullptr, Fake(2, 1), far, held);
    table.DropTarget(&gone);
    EXPECT(table.size() == 1 && gone.pending_count == 0);
    EXPECT(journal->InFlightEntries().size() == 1);
    PendingOwner owner;
    owner.id = 4;
    int forwarded = 0;
    table.GiveHeldTo(&owner, [&](const PendingEntry& e, const HeldStrings& s) {
      forwarded++;
      EXPECT(e.notification.handle == 2 && e.owner == &owner);
      EXPECT(s.count == 1 && s.blob == "/tmp");
    });
    EXPECT(forwarded == 1 && owner.owned == 1);
    const PendingEntry* entry = table.Find(2, 1);
    EXPECT(entry != nullptr && entry->owner == &owner);
  });
}

void DecisionCheckCases() {
  Case("decision check: unknown id, late, stale session, bad errno, bad kind, wrong syscall", [] {
    Owners owners;
    PendingTable table(&owners);
    PendingTarget t;
    t.fd = eventfd(0, EFD_CLOEXEC);
    t.handle = 1;
    PendingOwner owner;
    owner.id = 5;
    const uint64_t now = MonotonicNs();
    table.Add(&t, &owner, Fake(1, 1), now + 1000000000000ull);
    table.Add(&t, nullptr, Fake(1, 2), now + 1000000000000ull);
    table.Add(&t, &owner, Fake(1, 3), now);
    NotifyBuffers buffers;
    table.ExpireDue(now + 1, Continue(), &buffers, [](const PendingTable::Answered&) {});
    const PendingEntry* e = nullptr;
    EXPECT(CheckPending(table, 1, 1, 5, &e) == DecisionReason::kOk && e != nullptr);
    EXPECT(CheckPending(table, 1, 1, 0, &e) == DecisionReason::kOk);
    EXPECT(CheckPending(table, 1, 1, 6, &e) == DecisionReason::kStaleSession && e == nullptr);
    EXPECT(CheckPending(table, 1, 2, 5, &e) == DecisionReason::kStaleSession);  // held: no session owns it
    EXPECT(CheckPending(table, 1, 3, 5, &e) == DecisionReason::kLate);
    EXPECT(CheckPending(table, 1, 99, 5, &e) == DecisionReason::kUnknownId);
    EXPECT(CheckAnswer(Errno(0)) == DecisionReason::kBadErrno);
    EXPECT(CheckAnswer(Errno(4096)) == DecisionReason::kBadErrno);
    EXPECT(CheckAnswer(Errno(4095)) == DecisionReason::kOk);
    decision_channel::DecisionBody body;
    memset(&body, 0, sizeof body);
    body.kind = 9;
    Answer a;
    EXPECT(ChannelAnswer(body, &a) == DecisionReason::kBadKind);
    body.kind = decision_channel::kError;
    body.errno_value = -1;
    EXPECT(ChannelAnswer(body, &a) == DecisionReason::kBadErrno);
    body.kind = decision_channel::kValue;
    body.value = -7;
    EXPECT(ChannelAnswer(body, &a) == DecisionReason::kOk && a.kind == Answer::kValue && a.value == -7);
    Notification mkdirat = Fake(1, 1);
    mkdirat.nr = 258;
    EXPECT(CheckEmulation(EmulatedKind::kMkdir, mkdirat) == DecisionReason::kOk);
    EXPECT(CheckEmulation(EmulatedKind::kMount, mkdirat) == DecisionReason::kWrongSyscall);
    EXPECT(CheckEmulation(EmulatedKind::kMkdir, Fake(1, 1)) == DecisionReason::kWrongSyscall);
    mkdirat.arch = AUDIT_ARCH_I386;  // i386's 258 is set_tid_address
    EXPECT(CheckEmulation(EmulatedKind::kMkdir, mkdirat) == DecisionReason::kWrongSyscall);
    mkdirat.nr = 296;  // i386's mkdirat
    EXPECT(CheckEmulation(EmulatedKind::kMkdir, mkdirat) == DecisionReason::kOk);
    mkdirat.arch = AUDIT_ARCH_X86_64;
    mkdirat.nr = 0x40000000u | 258;  // x32's mkdirat
    EXPECT(CheckEmulation(EmulatedKind::kMkdir, mkdirat) == DecisionReason::kOk);
    mkdirat.nr = 0x40000000u | 165;  // x32's mount
    EXPECT(CheckEmulation(EmulatedKind::kMount, mkdirat) == DecisionReason::kOk);
    EXPECT(CheckEmulation(EmulatedKind::kKill, Fake(1, 1)) == DecisionReason::kOk);
    EXPECT(DropReasonOf(DecisionReason::kStaleSession) == DropReason::kWrongSession);
    EXPECT(DropReasonOf(DecisionReason::kBadErrno) == DropReason::kInvalid);
    close(t.fd);
  });
}

// The emulation table (emulation_table.hpp): rows in kind order, each found by its name, its
// policy.proto action and its syscalls; what every switch on the kind now reads.
void EmulationTableCases() {
  Case("emulation table: rows in kind order, found by name, rule action and syscall", [] {
    EXPECT(kEmulationCount == 4);
    for (size_t i = 0; i < kEmulationCount; ++i) {
      const EmulationRow& row = kEmulations[i];
      EXPECT(static_cast<size_t>(row.kind) == i + 1);
      EXPECT(EmulationOf(row.kind) == &row);
      EXPECT(EmulationNamed(row.name) == &row);
      EXPECT(EmulationOfRuleAction(row.rule_action) == &row);
      EXPECT((row.executor == EmulationExecutor::kHelperPool) == (row.helper_op != 0));
    }
    EXPECT(EmulationOf(EmulatedKind::kNone) == nullptr);
    EXPECT(EmulationNamed("continue") == nullptr);
    EXPECT(EmulationOfRuleAction(8) == nullptr);  // ask
    const EmulationRow* mkdir = EmulationNamed("mkdir");
    EXPECT(mkdir != nullptr && EmulatedSyscallNames(*mkdir, " and ") == "mkdir and mkdirat");
    const EmulatedCall* mkdirat = mkdir != nullptr ? EmulatedCallOf(*mkdir, 258) : nullptr;
    EXPECT(mkdirat != nullptr && mkdirat->dirfd == 0 && mkdirat->path == 1 && mkdirat->mode == 2);
    EXPECT(mkdir != nullptr && EmulatedCallOf(*mkdir, 165) == nullptr);
    const EmulationRow* kill = EmulationOf(EmulatedKind::kKill);
    EXPECT(kill != nullptr && AnswersAnySyscall(*kill) && strcmp(EmulatedTitle(EmulatedKind::kKill), "kill-container") == 0);
  });
}

// A ContainerPolicy written by hand in the protobuf wire format (policy.proto's field numbers).
struct Wire {
  std::string bytes;
  Wire& Varint(uint32_t field, uint64_t v) {
    Tag(field, 0);
    Raw(v);
    return *this;
  }
  Wire& Bytes(uint32_t field, const std::string& b) {
    Tag(field, 2);
    Raw(b.size());
    bytes += b;
    return *this;
  }
  Wire& Message(uint32_t field, const Wire& m) { return Bytes(field, m.bytes); }
  void Tag(uint32_t field, uint32_t type) { Raw((uint64_t(field) << 3) | type); }
  void Raw(uint64_t v) {
    do {
      uint8_t b = v & 0x7f;
      v >>= 7;
      bytes.push_back(char(v ? b | 0x80 : b));
    } while (v);
  }
};

// RuleAction: field 1 continue .. 8 ask; `inner` the action's own message.
Wire Action(uint32_t which, const Wire& inner = Wire()) { return Wire().Message(which, inner); }
Wire RuleOf(std::vector<std::string> syscalls, const Wire& action) {
  Wire r;
  for (const std::string& name : syscalls) r.Bytes(1, name);
  return r.Message(4, action);
}
Wire PolicyOf(uint64_t handle, const std::string& version, std::vector<Wire> rules) {
  Wire p;
  p.Varint(1, handle).Bytes(2, version);
  for (const Wire& r : rules) p.Message(3, r);
  return p;
}
PolicyVerdict ApplyWire(RuleTable& table, uint32_t handle, const Wire& w) {
  return table.Apply(handle, reinterpret_cast<const uint8_t*>(w.bytes.data()), w.bytes.size());
}

void RuleTableCases() {
  Case("rule table: ACK keeps the version; a NACK names the rule and reason and the previous version stays", [] {
    RuleTable rules;
    EXPECT(rules.RulesFor(1) == nullptr);
    const Wire eperm = Action(2, Wire().Varint(1, EPERM));
    PolicyVerdict verdict = ApplyWire(rules, 1, PolicyOf(1, "v1", {RuleOf({"mkdir"}, eperm)}));
    EXPECT(verdict.ack && verdict.version == "v1");
    const Wire ok = RuleOf({"getppid"}, Action(1));
    verdict = ApplyWire(rules, 1, PolicyOf(1, "v2", {ok, RuleOf({"mkdir"}, Action(2, Wire().Varint(1, 5000)))}));
    EXPECT(!verdict.ack && verdict.nack.rule_index == 1 && verdict.nack.reason == "bad-errno" && verdict.version == "v1");
    EXPECT(rules.RulesFor(1) != nullptr && rules.RulesFor(1)->set.version == "v1");
    auto reason = [&](const Wire& w) { return ApplyWire(rules, 1, w).nack.reason; };
    EXPECT(reason(PolicyOf(1, "v2", {RuleOf({"nosuchcall"}, Action(1))})) == "unknown-syscall");
    EXPECT(reason(PolicyOf(1, "v2", {RuleOf({"mkdir"}, Action(5))})) == "wrong-syscall");
    EXPECT(reason(PolicyOf(1, "v2", {RuleOf({"mkdir"}, Action(4, Wire().Bytes(1, "a/b")))})) == "bad-suffix");
    Wire path_on_getppid = Wire().Bytes(1, "getppid").Message(3, Wire().Varint(1, 0).Varint(2, 2).Bytes(3, "/tmp"));
    EXPECT(reason(PolicyOf(1, "v2", {path_on_getppid.Message(4, Action(1))})) == "bad-matcher");
    EXPECT(reason(PolicyOf(1, "v2", {Wire().Bytes(1, "getppid")})) == "no-action");
    EXPECT(reason(PolicyOf(1, "", {ok})) == "bad-version");
    EXPECT(reason(PolicyOf(2, "v2", {ok})) == "unknown-handle");
    Wire truncated = PolicyOf(1, "v2", {ok});
    truncated.bytes.pop_back();
    EXPECT(reason(truncated) == "malformed");
    EXPECT(rules.RulesFor(1)->set.version == "v1");
    verdict = ApplyWire(rules, 1, PolicyOf(1, "v2", {ok}));
    EXPECT(verdict.ack && rules.RulesFor(1)->set.version == "v2");
    rules.Forget(1);
    EXPECT(rules.RulesFor(1) == nullptr);
  });
  Case("rule set: first match wins; syscalls, seccomp-style argument comparisons and byte paths decide; a truncated path never matches", [] {
    RuleTable rules;
    Wire masked = Wire().Bytes(1, "mkdir").Message(2, Wire().Varint(1, 1).Varint(2, 7).Varint(3, 07).Varint(4, 07));
    Wire under_etc = Wire().Bytes(1, "mkdir").Message(3, Wire().Varint(1, 0).Varint(2, 2).Bytes(3, "/etc"));
    const PolicyVerdict applied = ApplyWire(rules, 1, PolicyOf(1, "m", {
      under_etc.Message(4, Action(2, Wire().Varint(1, EACCES))),
      masked.Message(4, Action(3, Wire().Varint(1, 7))),
      RuleOf({}, Action(8)),
    }));
    EXPECT(applied.ack);
    if (!applied.ack) return;
    const std::shared_ptr<const PolicyInForce> policy = rules.RulesFor(1);
    const RuleSet& set = policy->set;
    uint64_t args[6] = {0, 0755, 0, 0, 0, 0};
    PathView path{0, "/etc/x", 6, false};
    MatchInput in{AUDIT_ARCH_X86_64, 83, args, &path, 1};
    EXPECT(MatchRule(set, in) == 0);
    path = PathView{0, "/tmp/x", 6, false};
    EXPECT(MatchRule(set, in) == 2);  // 0755 & 07 != 07
    args[1] = 0777;
    EXPECT(MatchRule(set, in) == 1);
    path = PathView{0, "/etc/x", 6, true};
    args[1] = 0;
    EXPECT(MatchRule(set, in) == 2);  // truncated: the /etc rule does not see it
    in.nr = 39;  // getppid: only the catch-all
    EXPECT(MatchRule(set, in) == 2);
    // i386's 39 is mkdir: the rules written for mkdir cover it; x32's mkdir too.
    in.arch = AUDIT_ARCH_I386;
    path = PathView{0, "/etc/x", 6, false};
    EXPECT(MatchRule(set, in) == 0);
    in.arch = AUDIT_ARCH_X86_64;
    in.nr = static_cast<int32_t>(0x40000000u | 83);
    EXPECT(MatchRule(set, in) == 0);
    in.nr = static_cast<int32_t>(0x40000000u | 13);  // x32 has no 13 (x86_64's rt_sigaction is 512 there)
    EXPECT(MatchRule(set, in) == 2);
    in.arch = 0x12345678;  // no ABI of x86: only the catch-all (it names no syscall)
    EXPECT(MatchRule(set, in) == 2);
  });
  Case("syscall ABIs: i386 and x32 numbers map to the x86_64 number of the same name; i386-only names above 512", [] {
    EXPECT(CanonicalNr(AUDIT_ARCH_X86_64, 83) == 83);
    EXPECT(CanonicalNr(AUDIT_ARCH_I386, 39) == 83);
    EXPECT(CanonicalNr(AUDIT_ARCH_I386, 296) == 258);
    EXPECT(CanonicalNr(AUDIT_ARCH_I386, 21) == 165);
    EXPECT(CanonicalNr(AUDIT_ARCH_X86_64, 0x40000000u | 83) == 83);
    EXPECT(CanonicalNr(AUDIT_ARCH_X86_64, 0x40000000u | 520) == 59);  // x32's execve
    EXPECT(CanonicalNr(AUDIT_ARCH_X86_64, 0x40000000u | 59) == -1);   // x32's execve is 520
    EXPECT(CanonicalNr(AUDIT_ARCH_I386, 195) == I386Only(195));      // stat64
    EXPECT(CanonicalNr(AUDIT_ARCH_I386, 100000) == -1 && CanonicalNr(0x12345678, 1) == -1);
    EXPECT(strcmp(SyscallNameOf(AUDIT_ARCH_I386, 39), "mkdir") == 0);
    EXPECT(strcmp(SyscallNameOf(AUDIT_ARCH_I386, 195), "stat64") == 0);
    EXPECT(strcmp(SyscallNameOf(AUDIT_ARCH_X86_64, 0x40000000u | 512), "rt_sigaction") == 0);
    EXPECT(SyscallNameOf(AUDIT_ARCH_X86_64, 100000) == nullptr);
    EXPECT(CanonicalNrNamed("mkdir") == 83 && CanonicalNrNamed("stat64") == I386Only(195) && CanonicalNrNamed("nope") == -1);
    EXPECT(SyscallNrIn(Abi::kI386, "mkdir") == 39 && SyscallNrIn(Abi::kX32, "mkdir") == (0x40000000 | 83));
    EXPECT(SyscallNrIn(Abi::kX32, "stat64") == -1 && SyscallNrIn(Abi::kX8664, "newfstatat") == 262);
    // Paths at the name's positions in every ABI; the ones only i386 has by its number.
    EXPECT(PathArgMask(CanonicalNr(AUDIT_ARCH_I386, 39)) == 1u && PathArgMask(CanonicalNr(AUDIT_ARCH_I386, 296)) == 2u);
    EXPECT(PathArgMask(CanonicalNr(AUDIT_ARCH_I386, 21)) == 0x17u && PathArgMask(CanonicalNr(AUDIT_ARCH_I386, 300)) == 2u);
    EXPECT(ArgOfAbi(AUDIT_ARCH_I386, 0xdeadbeefffffff9cull) == 0xffffff9cull && ArgOfAbi(AUDIT_ARCH_X86_64, ~0ull) == ~0ull);
    // A rule may name an i386-only call; an unknown name is refused naming the three ABIs.
    RuleTable rules;
    EXPECT(ApplyWire(rules, 1, PolicyOf(1, "s", {RuleOf({"stat64"}, Action(2, Wire().Varint(1, EPERM)))})).ack);
    const PolicyVerdict nack = ApplyWire(rules, 2, PolicyOf(2, "u", {RuleOf({"nosuchcall"}, Action(2, Wire().Varint(1, EPERM)))}));
    EXPECT(!nack.ack && nack.nack.reason == "unknown-syscall" && nack.nack.detail.find("x86_64, i386 or x32") != std::string::npos);
  });
}

// test/testdata/rule-cases.json: compiled rules and what each notification gets from them. The
// control plane's matcher runs the same file (test/unit/rule-cases.test.ts), so the two cannot
// drift. The file is found beside the build: build/Release/../../test/testdata.
std::string RuleCasesPath() {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string("build/Release/x");
  dir.resize(dir.rfind('/'));
  return dir + "/../../test/testdata/rule-cases.json";
}

// A rule of the file as policy.proto's wire format, for the policy parser the engine uses.
Wire RuleWireOf(const json_value::Value& r) {
  Wire w;
  for (const json_value::Value& name : r["syscalls"].items) w.Bytes(1, name.text);
  static const char* const kArgOps[] = {"", "eq", "ne", "lt", "le", "gt", "ge", "masked-eq"};
  for (const json_value::Value& a : r["args"].items) {
    uint64_t op = 0;
    for (uint64_t i = 1; i < 8; ++i) if (a["op"].text == kArgOps[i]) op = i;
    w.Message(2, Wire().Varint(1, a["index"].U64()).Varint(2, op).Varint(3, a["value"].U64()).Varint(4, a["valueTwo"].U64()));
  }
  for (const json_value::Value& m : r["paths"].items) {
    w.Message(3, Wire().Varint(1, m["index"].U64()).Varint(2, m["op"].text == "prefix" ? 2 : 1).Bytes(3, m["value"].text));
  }
  const json_value::Value& a = r["action"];
  Wire action;
  if (a.Has("continue")) action = Action(1);
  else if (a.Has("error")) action = Action(2, Wire().Varint(1, a["error"]["errno"].U64()));
  else if (a.Has("value")) action = Action(3, Wire().Varint(1, a["value"]["value"].U64()));
  else if (a.Has("mkdir")) action = Action(4, Wire().Bytes(1, a["mkdir"]["suffix"].text));
  else if (a.Has("mount")) action = Action(5, Wire().Varint(1, a["mount"]["requireCapSysAdmin"].boolean ? 1 : 0));
  else if (a.Has("kill")) action = Action(6);
  else if (a.Has("freeze")) action = Action(7, Wire().Varint(1, a["freeze"]["errno"].U64()));
  else if (a.Has("ask")) action = Action(8);
  return w.Message(4, action);
}

std::string Shown(const std::string& bytes) {
  if (bytes.size() > 64) return Shown(bytes.substr(0, 24)) + "...(" + std::to_string(bytes.size()) + " bytes)";
  std::string out;
  for (unsigned char c : bytes) {
    char hex[8];
    snprintf(hex, sizeof hex, "\\x%02x", c);
    out += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : std::string(hex);
  }
  return out;
}

// The answer the file expects, in the words AnswerWords gives.
std::string ExpectedWords(const json_value::Value& answer) {
  if (answer.kind == json_value::Value::kString) return answer.text;
  if (answer.Has("error")) return "error " + std::to_string(answer["error"].I64());
  if (answer.Has("value")) return "value " + std::to_string(answer["value"].I64());
  if (answer.Has("freeze")) return "freeze " + std::to_string(answer["freeze"].I64());
  if (answer.Has("mkdir")) return "mkdir " + Shown(answer["mkdir"].text) + " mode " + std::to_string(answer["mode"].U64());
  if (answer.Has("mount")) return std::string("mount cap ") + (answer["mount"]["requireCapSysAdmin"].boolean ? "1" : "0");
  return "none";
}

// What `rule` gives the call, as the engine answers it (engine_rules.cpp): at once, or the
// emulation with its arguments (rule_arguments.hpp: a mkdir's path built by SuffixedPath, a
// mount's arguments), or the errno those give at once.
std::string AnswerWords(const Rule& rule, const MatchInput& in) {
  switch (rule.kind) {
    case RuleKind::kContinue: return "continue";
    case RuleKind::kError: return "error " + std::to_string(rule.value);
    case RuleKind::kValue: return "value " + std::to_string(rule.value);
    case RuleKind::kAsk: return "ask";
    case RuleKind::kEmulate: break;
  }
  const EmulationRow* row = EmulationOf(rule.emulated);
  if (row == nullptr) return "no emulation";
  switch (row->shape) {
    case EmulationShape::kPathCall: {
      const EmulatedCall* call = EmulatedCallOf(*row, CanonicalNr(in.arch, static_cast<uint32_t>(in.nr)));
      const PathView* path = call != nullptr ? PathAt(in.paths, in.path_count, call->path) : nullptr;
      std::string out;
      const int err = SuffixedPath(path, rule.suffix, &out);
      if (err != 0) return "error " + std::to_string(err);
      return "mkdir " + Shown(out) + " mode " + std::to_string(call != nullptr && call->mode >= 0 ? in.args[call->mode] & 07777 : 0);
    }
    case EmulationShape::kMount: {
      MountArgs mount;
      const int err = MountFromPaths(in.paths, in.path_count, in.args, rule.require_cap_sys_admin, &mount);
      if (err != 0) return "error " + std::to_string(err);
      return std::string("mount cap ") + (mount.require_cap_sys_admin ? "1" : "0");
    }
    case EmulationShape::kKill: return "kill";
    case EmulationShape::kFreeze: return "freeze " + std::to_string(rule.value);
  }
  return "?";
}

void RuleCaseFileCases() {
  std::string text;
  FILE* f = fopen(RuleCasesPath().c_str(), "rb");
  if (f != nullptr) {
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    fclose(f);
  }
  json_value::Value doc;
  json_value::Parser parser(text);
  const bool parsed = f != nullptr && parser.Parse(&doc);
  Case("rule cases: test/testdata/rule-cases.json is read", [&] {
    if (f == nullptr) g_problems.push_back("cannot open " + RuleCasesPath());
    else if (!parsed) g_problems.push_back("rule-cases.json: " + parser.error());
    EXPECT(doc["policies"].items.size() >= 10);
  });
  for (const json_value::Value& policy : doc["policies"].items) {
    const std::string name = "rule cases: " + policy["name"].text;
    Case(name.c_str(), [&] {
      std::vector<Wire> rules;
      for (const json_value::Value& r : policy["rules"].items) rules.push_back(RuleWireOf(r));
      RuleTable table;
      const PolicyVerdict verdict = ApplyWire(table, 1, PolicyOf(1, "cases", rules));
      if (!verdict.ack) {
        g_problems.push_back("refused: rule " + std::to_string(verdict.nack.rule_index) + " " + verdict.nack.reason + ": " + verdict.nack.detail);
        return;
      }
      const RuleSet& set = table.RulesFor(1)->set;
      int number = 0;
      for (const json_value::Value& call : policy["calls"].items) {
        ++number;
        const std::string& abi_name = call["abi"].text;
        const Abi abi = abi_name == "i386" ? Abi::kI386 : abi_name == "x32" ? Abi::kX32 : Abi::kX8664;
        uint64_t args[6] = {0, 0, 0, 0, 0, 0};
        for (size_t i = 0; i < call["args"].items.size() && i < 6; ++i) args[i] = call["args"].items[i].U64();
        std::vector<std::string> bytes;
        for (const json_value::Value& p : call["paths"].items) {
          std::string b;
          for (uint64_t k = 0; k < p["repeat"].U64(1); ++k) b += p["value"].text;
          bytes.push_back(b);
        }
        PathView views[6];
        size_t count = 0;
        for (size_t i = 0; i < bytes.size() && i < 6; ++i, ++count) {
          const json_value::Value& p = call["paths"].items[i];
          views[i] = PathView{static_cast<uint8_t>(p["index"].U64()), bytes[i].data(), static_cast<uint32_t>(bytes[i].size()), p["truncated"].boolean};
        }
        const int64_t nr = SyscallNrIn(abi, call["syscall"].text.c_str());
        const MatchInput in{abi == Abi::kI386 ? AUDIT_ARCH_I386 : AUDIT_ARCH_X86_64, static_cast<int32_t>(nr), args, views, count};
        const int index = MatchRule(set, in);
        const int64_t expected = call["rule"].I64(-1);
        const std::string what = "call " + std::to_string(number) + " (" + call["syscall"].text + (call.Has("note") ? ": " + call["note"].text : "") + ")";
        if (nr < 0) g_problems.push_back(what + ": no such syscall in " + (abi_name.empty() ? "x86_64" : abi_name));
        if (index != expected) {
          g_problems.push_back(what + ": rule " + std::to_string(index) + ", expected " + std::to_string(expected));
          continue;
        }
        if (index < 0) continue;
        const std::string got = AnswerWords(set.rules[static_cast<size_t>(index)], in);
        const std::string want = ExpectedWords(call["answer"]);
        if (got != want) g_problems.push_back(what + ": " + got + ", expected " + want);
      }
    });
  }
}

void BoundaryCases() {
  Case("json boundary: complete at the top-level close, braces in strings and escapes do not count", [] {
    JsonBoundary a;
    EXPECT(!a.Feed("{\"a\":\"}\\\"{\",", 12));
    EXPECT(a.Feed("\"b\":[1,{}]} trailing", 20));
    JsonBoundary b;
    EXPECT(!b.Feed("  nope", 6));
    JsonBoundary c;
    EXPECT(!c.Feed("[[", 2) && c.Feed("]]", 2));
  });

  Case("fd-store names: n<handle> and r<handle> round trip; anything else is no handle", [] {
    EXPECT(HandleOfName(NotifyName(42), 'n') == 42);
    EXPECT(HandleOfName(RecordName(4294967295u), 'r') == 4294967295u);
    EXPECT(HandleOfName("n0", 'n') == 0);
    EXPECT(HandleOfName("n4294967296", 'n') == 0);
    EXPECT(HandleOfName("n12a", 'n') == 0);
    EXPECT(HandleOfName("r12", 'n') == 0);
    EXPECT(HandleOfName("n", 'n') == 0);
  });
}


bool AnyWritable(const std::string&) { return true; }
bool NoneWritable(const std::string&) { return false; }

void CgroupPathCases() {
  // This machine's layout: v1 hierarchies under a tmpfs, the v2 unified one beside them.
  const std::string hybrid =
      "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
      "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
      "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n";
  const std::string v2_only = "30 23 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
  const std::string agent_at_root = "6:freezer:/\n0::/\n";

  Case("cgroup paths: /proc/<pid>/cgroup gives the v2 path and the v1 freezer's, whatever else is listed", [&] {
    std::string v2, freezer;
    ParseCgroups("9:name=systemd:/x\n6:freezer:/runc/c1\n4:memory,cpu:/m\n0::/runc/c1\n", &v2, &freezer);
    EXPECT(v2 == "/runc/c1");
    EXPECT(freezer == "/runc/c1");
    std::string v2b, freezerb;
    ParseCgroups("0::/kubepods/pod1/ctr:with:colons\ngarbage\n", &v2b, &freezerb);
    EXPECT(v2b == "/kubepods/pod1/ctr:with:colons");  // the path is everything after the second colon
    EXPECT(freezerb.empty());
  });

  Case("cgroup paths: mountinfo gives the first cgroup2 mount and the v1 mount carrying freezer; escapes undone", [&] {
    CgroupMount v2, freezer;
    FindCgroupMounts(hybrid, &v2, &freezer);
    EXPECT(v2.mountpoint == "/sys/fs/cgroup/unified" && v2.root == "/");
    EXPECT(freezer.mountpoint == "/sys/fs/cgroup/freezer");
    CgroupMount e2, ef;
    FindCgroupMounts("50 1 0:40 /ns\\040root /mnt/cg\\134v2 rw - cgroup2 cgroup2 rw\nshort line - x\n", &e2, &ef);
    EXPECT(e2.root == "/ns root");
    EXPECT(e2.mountpoint == "/mnt/cg\\v2");
    EXPECT(ef.mountpoint.empty());
    EXPECT(UnescapeMountinfo("a\\b\\9zz\\011") == "a\\b\\9zz\t");  // only \ooo is an escape
  });

  Case("cgroup paths: whole components only; a mount's root maps the path into its mount point", [&] {
    EXPECT(CgroupContains("/", "/anything"));
    EXPECT(CgroupContains("/a/b", "/a/b"));
    EXPECT(CgroupContains("/a/b", "/a/b/c"));
    EXPECT(!CgroupContains("/a/b", "/a/bc"));
    std::string file;
    EXPECT(MapToControlFile({"/kubepods", "/sys/fs/cgroup"}, "/kubepods/pod1", "cgroup.freeze", &file));
    EXPECT(file == "/sys/fs/cgroup/pod1/cgroup.freeze");
    EXPECT(!MapToControlFile({"/kubepods", "/sys/fs/cgroup"}, "/other/pod1", "cgroup.freeze", &file));
    EXPECT(!MapToControlFile({"/", ""}, "/x", "cgroup.freeze", &file));
  });

  Case("cgroup paths: the freezer chosen on hybrid (v1 first), v2-only and cgroup-namespaced hosts", [&] {
    FreezeTarget h = ChooseFreezer("6:freezer:/runc/c1\n0::/runc/c1\n", agent_at_root, hybrid, AnyWritable);
    EXPECT(h.file == "/sys/fs/cgroup/freezer/runc/c1/freezer.state");
    EXPECT(std::string(h.freeze_value) == "FROZEN" && std::string(h.thaw_value) == "THAWED");
    FreezeTarget v = ChooseFreezer("0::/system.slice/c2\n", "0::/system.slice/agent\n", v2_only, AnyWritable);
    EXPECT(v.file == "/sys/fs/cgroup/system.slice/c2/cgroup.freeze");
    EXPECT(std::string(v.freeze_value) == "1" && std::string(v.thaw_value) == "0");
    const std::string namespaced = "30 23 0:27 /kubepods /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
    FreezeTarget n = ChooseFreezer("0::/kubepods/pod9/c\n", "0::/agent\n", namespaced, AnyWritable);
    EXPECT(n.file == "/sys/fs/cgroup/pod9/c/cgroup.freeze");
    // v1 freezer not writable here: v2 is tried next.
    FreezeTarget fallback = ChooseFreezer("6:freezer:/runc/c1\n0::/runc/c1\n", agent_at_root, hybrid,
                                          [](const std::string& f) { return f.find("freezer.state") == std::string::npos; });
    EXPECT(fallback.file == "/sys/fs/cgroup/unified/runc/c1/cgroup.freeze");
  });

  Case("cgroup paths: refused for a root cgroup, for one holding the data plane, and when nothing is writable", [&] {
    FreezeTarget root = ChooseFreezer("6:freezer:/\n0::/\n", agent_at_root, hybrid, AnyWritable);
    EXPECT(root.file.empty() && root.refusal != nullptr && std::string(root.refusal).find("root cgroup") != std::string::npos);
    FreezeTarget ours = ChooseFreezer("0::/system.slice\n", "0::/system.slice/agent.service\n", v2_only, AnyWritable);
    EXPECT(ours.file.empty() && std::string(ours.refusal).find("holds the data plane") != std::string::npos);
    FreezeTarget none = ChooseFreezer("0::/c\n", "0::/agent\n", v2_only, NoneWritable);
    EXPECT(none.file.empty() && none.refusal != nullptr);
  });
}

void TallyCases() {
  AnswerTally::Key a;
  a.handle = 1;
  a.nr = 110;
  a.arch = AUDIT_ARCH_X86_64;
  Case("answer tally: latencies fall in the bucket whose bound is the first >= them; above all of them: none", [&] {
    EXPECT(LatencyBucket(0) == 0);
    EXPECT(LatencyBucket(10000) == 0);
    EXPECT(LatencyBucket(10001) == 1);
    EXPECT(LatencyBucket(5000000000ull) == kLatencyBuckets - 1);
    EXPECT(LatencyBucket(5000000001ull) == kLatencyBuckets);
    for (size_t i = 1; i < kLatencyBuckets; i++) EXPECT(kLatencyBucketBoundsNs[i - 1] < kLatencyBucketBoundsNs[i]);
  });
  Case("answer tally: one entry per key with count, latency sum and buckets; first_ns from the first answer", [&] {
    AnswerTally tally;
    EXPECT(tally.empty() && tally.first_ns() == UINT64_MAX);
    AnswerTally::Key gone = a;
    gone.gone = true;
    AnswerTally::Key other = a;
    other.by = AnsweredBy::kFastPath;
    EXPECT(tally.Add(a, 1000, 500));
    EXPECT(tally.Add(a, 30000, 600));
    EXPECT(tally.Add(gone, 2000, 700));
    EXPECT(tally.Add(other, 9000000000ull, 800));
    EXPECT(tally.Add(a, 3000, 900));
    EXPECT(tally.first_ns() == 500);
    EXPECT(tally.entries().size() == 3);
    const AnswerTally::Entry& e = tally.entries()[0];
    EXPECT(e.key == a && e.count == 3 && e.latency_sum_ns == 34000);
    EXPECT(e.buckets[0] == 2 && e.buckets[2] == 1);
    EXPECT(tally.entries()[1].key == gone && tally.entries()[1].count == 1);
    uint64_t bucketed = 0;
    for (uint32_t b : tally.entries()[2].buckets) bucketed += b;
    EXPECT(tally.entries()[2].count == 1 && bucketed == 0);  // 9 s: above the last bound
    tally.Clear();
    EXPECT(tally.empty() && tally.first_ns() == UINT64_MAX);
    EXPECT(tally.Add(a, 1, 1000) && tally.first_ns() == 1000 && tally.entries()[0].count == 1);
  });
  Case("answer tally: a new key past kMaxEntries is refused (nothing counted); known keys still count", [&] {
    AnswerTally tally;
    AnswerTally::Key k = a;
    for (uint32_t i = 0; i < AnswerTally::kMaxEntries; i++) {
      k.handle = i + 1;
      EXPECT(tally.Add(k, 1, 1));
    }
    k.handle = 100000;
    EXPECT(!tally.Add(k, 1, 1));
    EXPECT(tally.entries().size() == AnswerTally::kMaxEntries);
    EXPECT(tally.Add(a, 1, 1));
    EXPECT(tally.entries()[0].count == 2);
  });
}

// The shape /proc/<pid>/status has (Linux 6.x), cut to the lines around the ones read.
constexpr char kStatus[] =
    "Name:\tsh\nUmask:\t0027\nState:\tS (sleeping)\nTgid:\t42\nPid:\t42\n"
    "Uid:\t1000\t1001\t1002\t1003\nGid:\t2000\t2001\t2002\t2003\nFDSize:\t64\n"
    "Groups:\t4 24 27 \nNStgid:\t42\nVmRSS:\t  1024 kB\nCapInh:\t0000000000000000\n"
    "CapPrm:\t000001ffffffffff\nCapEff:\t00000000a80425fb\nCapBnd:\t000001ffffffffff\n";

void ProcStatusCases() {
  using nshelper::Credentials;
  using nshelper::ParseProcStatus;
  Case("proc status: fsuid and fsgid are the fourth ids, umask octal, CapEff hex, every group", [] {
    Credentials c;
    EXPECT(ParseProcStatus(kStatus, &c));
    EXPECT(c.fsuid == 1003 && c.fsgid == 2003);
    EXPECT(c.umask == 027);
    EXPECT(c.cap_eff == 0xa80425fbull);
    EXPECT((c.groups == std::vector<gid_t>{4, 24, 27}));
  });
  Case("proc status: an empty Groups line gives no group, and the lines after it still count", [] {
    std::string text(kStatus);
    text.replace(text.find("4 24 27 "), 8, "");
    Credentials c;
    c.groups = {99};
    EXPECT(ParseProcStatus(text.c_str(), &c));
    EXPECT(c.groups.empty());
    EXPECT(c.fsuid == 1003);
  });
  Case("proc status: without Uid, Gid or CapEff (a cut read) it is refused; a cut Groups line keeps what was read", [] {
    for (const char* key : {"Uid:", "Gid:", "CapEff:"}) {
      std::string text(kStatus);
      text.replace(text.find(key), 1, "X");
      Credentials c;
      EXPECT(!ParseProcStatus(text.c_str(), &c));
    }
    std::string cut(kStatus);
    cut.resize(cut.find("24 27"));
    Credentials c;
    EXPECT(!ParseProcStatus(cut.c_str(), &c));
    EXPECT((c.groups == std::vector<gid_t>{4}));
    Credentials none;
    EXPECT(!ParseProcStatus("", &none));
  });
  Case("namespace link: the inode of this process's ns/mnt link, as its stat gives it; none in a text without one", [] {
    NamespaceLinkText link;
    EXPECT(ReadNamespaceLink(AT_FDCWD, "/proc/self/ns/mnt", &link));
    struct stat st;
    EXPECT(stat("/proc/self/ns/mnt", &st) == 0 && NamespaceInode(link) == uint64_t(st.st_ino));
    EXPECT(strncmp(link.text, "mnt:[", 5) == 0);
    NamespaceLinkText other;
    snprintf(other.text, sizeof other.text, "anon_inode:[eventfd]");
    EXPECT(NamespaceInode(other) == 0);
    EXPECT(!ReadNamespaceLink(AT_FDCWD, "/proc/self/ns/no-such", &other));
  });
  Case("proc status: a value that is not a number is not read as one (no sign, no other line's digits)", [] {
    std::string text(kStatus);
    text.replace(text.find("0027"), 4, "-1");
    text.replace(text.find("1000\t1001"), 4, "x");
    Credentials c;
    EXPECT(!ParseProcStatus(text.c_str(), &c));  // Uid has three numbers left: not a Uid line
    EXPECT(c.umask == 022);                      // "-1" is no umask: the default stays
  });
}
void MountKeyCases() {
  Case("mount namespace keys: kept per container and task, the first one stays, forgotten with the container", [] {
    MountNamespaceCache keys;
    EXPECT(keys.Find(1, 100) == 0);
    keys.Keep(1, 100, 4026531841ull);
    EXPECT(keys.Find(1, 100) == 4026531841ull);
    EXPECT(keys.Find(2, 100) == 0);  // the same pid in another container is another task
    EXPECT(keys.Find(1, 101) == 0);
    // A second read for the same task (another lane raced the first) does not replace the key: a
    // restarted call must land in the partition its original noted.
    keys.Keep(1, 100, 4026532000ull);
    EXPECT(keys.Find(1, 100) == 4026531841ull);
    keys.Keep(0, 100, 7);  // no container named: not kept
    EXPECT(keys.Find(0, 100) == 0);
    keys.Keep(3, 100, 0);  // the task was gone: not kept
    EXPECT(keys.Find(3, 100) == 0);
    keys.Keep(2, 100, 9);
    keys.Forget(1);
    EXPECT(keys.Find(1, 100) == 0);
    EXPECT(keys.Find(2, 100) == 9);
  });
  Case("mount namespace keys: at most 256, the oldest pushed out first", [] {
    MountNamespaceCache keys;
    for (pid_t pid = 1; pid <= pid_t(MountNamespaceCache::kEntries); ++pid) keys.Keep(7, pid, 1000 + uint64_t(pid));
    EXPECT(keys.Find(7, 1) == 1001);
    keys.Keep(7, 5000, 42);
    EXPECT(keys.Find(7, 1) == 0);
    EXPECT(keys.Find(7, 2) == 1002);
    EXPECT(keys.Find(7, 5000) == 42);
  });
}

// The identity of fd 0 of `pid` and its close-on-exec flag, from /proc.
bool StdinOf(pid_t pid, ino_t* ino, bool* cloexec) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/0", int(pid));
  struct stat st;
  if (stat(path, &st) != 0) return false;
  *ino = st.st_ino;
  snprintf(path, sizeof path, "/proc/%d/fdinfo/0", int(pid));
  Fd info(open(path, O_RDONLY | O_CLOEXEC));
  char text[4096] = {};
  return info.get() >= 0 && read(info.get(), text, sizeof text - 1) > 0 && nshelper::ParseFdinfoReplaceable(text, cloexec);
}

// What the helper keeps per task for AnswerZero: its fdinfo/0 and its pidfd.
struct AnswerHandles {
  Fd stdin_info;
  Fd pidfd;
  explicit AnswerHandles(pid_t pid) {
    char info[64];
    snprintf(info, sizeof info, "/proc/%d/fdinfo/0", int(pid));
    stdin_info.Reset(open(info, O_RDONLY | O_CLOEXEC));
    pidfd.Reset(int(syscall(SYS_pidfd_open, pid, 0)));
  }
};

// A target started for `calls` getppid calls, its first notification in hand: what each answer case
// begins with.
struct NotifiedTarget {
  Target target;
  NotifyBuffers buffers;
  Notification n;
  const bool started;
  explicit NotifiedTarget(int calls) : started(target.Start(calls) && target.Next(&buffers, &n, 1)) {}
};

void AnswerCases() {
  using nshelper::AnswerZero;
  using nshelper::Delivery;
  using nshelper::ParseFdinfoReplaceable;
  Case("answer: fdinfo's flags are octal (O_CLOEXEC read from them); a lock line, or no flags line, is not replaceable", [] {
    bool cloexec = false;
    EXPECT(ParseFdinfoReplaceable("pos:\t0\nflags:\t02100002\nmnt_id:\t28\nino:\t5\n", &cloexec) && cloexec);
    EXPECT(ParseFdinfoReplaceable("pos:\t0\nflags:\t0100002\nmnt_id:\t28\n", &cloexec) && !cloexec);
    EXPECT(!ParseFdinfoReplaceable("pos:\t0\nflags:\t0100002\nlock:\t1: POSIX  ADVISORY  WRITE 7 00:05:6 0 EOF\n", &cloexec));
    EXPECT(!ParseFdinfoReplaceable("pos:\t0\nmnt_id:\t28\n", &cloexec));
  });
  Case("answer: 0 through ADDFD+SEND is taken by the target (its call returns 0), and its fd 0 is as it was", [] {
    NotifiedTarget t(2);
    EXPECT(t.started);
    Target& target = t.target;
    Notification& n = t.n;
    ino_t before = 0, after = 0;
    bool cloexec_before = true, cloexec_after = true;
    EXPECT(StdinOf(target.pid, &before, &cloexec_before));
    const AnswerHandles handles(target.pid);
    int err = 0;
    EXPECT(AnswerZero(target.notify_fd, n.id, handles.stdin_info.get(), handles.pidfd.get(), &err) == Delivery::kTaken);
    EXPECT(target.Result() == 0);
    // The child is in its second call now: its fd 0 is the same file, with the same flag.
    EXPECT(target.Next(&t.buffers, &n, 1));
    EXPECT(StdinOf(target.pid, &after, &cloexec_after));
    EXPECT(after == before && cloexec_after == cloexec_before);
    EXPECT(AnswerZero(target.notify_fd, n.id, handles.stdin_info.get(), handles.pidfd.get(), &err) == Delivery::kTaken);
    EXPECT(target.Result() == 0);
  });
  Case("answer: without the target's fd 0 (no fdinfo, no pidfd) the answer is a plain NOTIF_SEND: sent, delivery unknown", [] {
    NotifiedTarget t(1);
    EXPECT(t.started);
    int err = 0;
    EXPECT(AnswerZero(t.target.notify_fd, t.n.id, -1, -1, &err) == Delivery::kSent);
    EXPECT(t.target.Result() == 0);
  });
  Case("answer: a target gone from its wait (killed) is told apart: dropped, not taken", [] {
    NotifiedTarget t(1);
    EXPECT(t.started);
    Target& target = t.target;
    const AnswerHandles handles(target.pid);
    kill(target.pid, SIGKILL);
    waitpid(target.pid, nullptr, 0);
    target.pid = -1;
    int err = 0;
    EXPECT(AnswerZero(target.notify_fd, t.n.id, handles.stdin_info.get(), handles.pidfd.get(), &err) == Delivery::kDropped);
    EXPECT(err == ENOENT);
  });
}

void RecordCases() {
  Case("container record: read back whole at any size up to 1 MiB (empty, small, past the first buffer); over 1 MiB is an error", [] {
    for (const size_t size : {size_t(0), size_t(300), size_t(4096), size_t(10000), size_t(1024 * 1024)}) {
      std::string written(size, 'r');
      for (size_t i = 0; i < size; i++) written[i] = char('a' + i % 26);
      int fd = -1;
      std::string error, read;
      EXPECT(WriteSealedMemfd(written, &fd, &error));
      EXPECT(ReadSealedMemfd(fd, &read, &error));
      EXPECT(read == written);
      close(fd);
    }
    const int big = memfd_create("too-big", MFD_CLOEXEC);
    EXPECT(big >= 0 && ftruncate(big, 1024 * 1024 + 1) == 0);
    std::string error, read;
    EXPECT(!ReadSealedMemfd(big, &read, &error));
    EXPECT(error.find("over 1 MiB") != std::string::npos);
    close(big);
  });
}

void RecordFileCases() {
  Case("record file: records of any size up to 1 MiB read back by handle; another handle's place, or a released one, reads as none", [] {
    std::string error;
    std::unique_ptr<RecordFile> file = RecordFile::Create(&error);
    EXPECT(file != nullptr);
    std::map<uint32_t, RecordFile::Place> places;
    std::map<uint32_t, std::string> written;
    uint32_t handle = 1;
    for (const size_t size : {size_t(0), size_t(300), size_t(4096 - 16), size_t(4096), size_t(10000), size_t(1024 * 1024)}) {
      std::string json(size, 'x');
      for (size_t i = 0; i < size; i++) json[i] = char('a' + (i + handle) % 26);
      EXPECT(file->Append(handle, json, &places[handle], &error));
      EXPECT(places[handle].offset % int64_t(RecordFile::kAlign) == 0);
      written[handle++] = json;
    }
    for (const auto& w : written) {
      std::string read;
      EXPECT(file->Read(places[w.first], w.first, &read, &error));
      EXPECT(read == w.second);
    }
    std::string read;
    EXPECT(!file->Read(places[2], 3, &read, &error));  // handle 2's region is not handle 3's
    EXPECT(error.find("no record of container handle 3") != std::string::npos);
    RecordFile::Place none;
    EXPECT(!file->Read(none, 1, &read, &error));
    EXPECT(!file->Append(99, std::string(1024 * 1024 + 1, 'y'), &none, &error));
    EXPECT(error.find("over 1 MiB") != std::string::npos);
    file->Release(places[2]);
    EXPECT(!file->Read(places[2], 2, &read, &error));
  });
  Case("record file: a successor's scan finds every live record and none released, and appends after the last", [] {
    std::string error;
    std::unique_ptr<RecordFile> file = RecordFile::Create(&error);
    EXPECT(file != nullptr);
    std::map<uint32_t, RecordFile::Place> places;
    for (uint32_t handle = 1; handle <= 2000; handle++) {
      const std::string json = "{\"v\":1,\"id\":\"c" + std::to_string(handle) + "\"," + std::string(handle % 7 == 0 ? 5000 : 200, ' ') + "}";
      EXPECT(file->Append(handle, json, &places[handle], &error));
    }
    for (uint32_t handle = 1; handle <= 2000; handle += 3) file->Release(places[handle]);
    const int copy = dup(file->fd());
    std::unique_ptr<RecordFile> successor = RecordFile::Open(copy, &error);
    EXPECT(successor != nullptr);
    const std::map<uint32_t, RecordFile::Place> found = successor->Scan();
    size_t live = 0;
    for (uint32_t handle = 1; handle <= 2000; handle++) {
      const bool released = (handle - 1) % 3 == 0;
      if (!released) live++;
      auto it = found.find(handle);
      EXPECT(released ? it == found.end() : it != found.end());
      if (it == found.end()) continue;
      EXPECT(it->second.offset == places[handle].offset && it->second.bytes == places[handle].bytes);
      std::string read;
      EXPECT(successor->Read(it->second, handle, &read, &error));
      EXPECT(read.find("\"c" + std::to_string(handle) + "\"") != std::string::npos);
    }
    EXPECT(found.size() == live);
    RecordFile::Place next;
    EXPECT(successor->Append(5000, "{}", &next, &error));
    EXPECT(next.offset >= places[2000].offset + int64_t(places[2000].bytes));
    // Released regions hold no memory: only the live records' pages are allocated.
    struct stat st;
    EXPECT(fstat(successor->fd(), &st) == 0);
    EXPECT(st.st_blocks * 512 < st.st_size * 3 / 4);
  });
}

void NotifyFdCases() {
  Case("notify fd: a seccomp listener is one, before and while a notification waits; an eventfd, a pipe, /dev/null and a closed fd are not", [] {
    Target target;
    EXPECT(target.Start(1));
    EXPECT(IsSeccompNotifyFd(target.notify_fd));
    NotifyBuffers buffers;
    Notification n;
    EXPECT(target.Next(&buffers, &n, 1));
    EXPECT(IsSeccompNotifyFd(target.notify_fd));  // and the check answered nothing: the call still waits
    EXPECT(NotifyIdValid(target.notify_fd, n.id));
    // The wake mode can be cleared and set again (wake_mode.hpp); nothing else takes it.
    EXPECT(NotifySetSyncWakeUp(target.notify_fd, false));
    EXPECT(NotifySetSyncWakeUp(target.notify_fd, true));
    int pipefd[2];
    EXPECT(pipe2(pipefd, O_CLOEXEC) == 0);
    const int event = eventfd(0, EFD_CLOEXEC);
    const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    EXPECT(!IsSeccompNotifyFd(event));
    EXPECT(!IsSeccompNotifyFd(pipefd[0]));
    EXPECT(!IsSeccompNotifyFd(null));
    EXPECT(!NotifySetSyncWakeUp(event, false));
    close(event);
    EXPECT(!IsSeccompNotifyFd(event));
    close(pipefd[0]);
    close(pipefd[1]);
    close(null);
  });
}

// A TSC and a CLOCK_MONOTONIC the test moves by hand; Ns() can first let time pass, as an
// interruption between the clock's two tick reads would.
struct FakeClocks {
  static inline uint64_t ticks = 0;
  static inline uint64_t ns = 0;
  static inline uint64_t interrupted_ns = 0;
  static uint64_t Ticks() { return ticks; }
  static uint64_t Ns() {
    Advance(interrupted_ns);
    return ns;
  }
  // Both clocks `d` ns on, the TSC at 2.5 GHz times (1 + ppm / 1e6).
  static void Advance(uint64_t d, double ppm = 0) {
    ns += d;
    ticks += static_cast<uint64_t>(static_cast<double>(d) * 2.5 * (1 + ppm / 1e6));
  }
};

void TscClockCases() {
  using Clock = BasicTscClock<FakeClocks>;
  auto reset = [] {
    FakeClocks::ticks = 5000000000ull;
    FakeClocks::ns = 1000000000ull;
    FakeClocks::interrupted_ns = 0;
  };
  auto distance = [](uint64_t a, uint64_t b) { return a > b ? a - b : b - a; };
  Case("tsc clock: where the TSC is not the kernel's clocksource, every reading is CLOCK_MONOTONIC's", [&] {
    reset();
    Clock clock(false);
    EXPECT(clock.Now() == FakeClocks::ns);
    FakeClocks::ticks += 2500;  // the TSC alone moving changes nothing
    EXPECT(clock.Now() == FakeClocks::ns);
    FakeClocks::Advance(5000000);
    EXPECT(clock.Now() == FakeClocks::ns && !clock.calibrated());
  });
  Case("tsc clock: the real clock until 1 ms has given it the TSC's rate, then the TSC between anchors", [&] {
    reset();
    Clock clock(true);
    EXPECT(clock.Now() == FakeClocks::ns && !clock.calibrated());
    FakeClocks::Advance(500000);
    EXPECT(clock.Now() == FakeClocks::ns && !clock.calibrated());
    FakeClocks::Advance(600000);
    const uint64_t anchor = FakeClocks::ns;
    EXPECT(clock.Now() == anchor && clock.calibrated());
    FakeClocks::ticks += 2500;  // 1 µs of TSC, the fake CLOCK_MONOTONIC not moved: read from the TSC
    EXPECT(distance(clock.Now(), anchor + 1000) <= 1);
    FakeClocks::ticks += 2500 * 999;
    EXPECT(distance(clock.Now(), anchor + 1000000) <= 1);
  });
  Case("tsc clock: re-anchored every 2 ms, it stays within 1 µs of a CLOCK_MONOTONIC slewed 500 ppm either way", [&] {
    for (double ppm : {500.0, -500.0}) {
      reset();
      Clock clock(true);
      clock.Now();
      uint64_t worst = 0;
      for (int step = 0; step < 20000; step++) {  // 200 ms in 10 µs steps
        FakeClocks::Advance(10000, ppm);
        worst = std::max(worst, distance(clock.Now(), FakeClocks::ns));
      }
      EXPECT(clock.calibrated());
      EXPECT(worst <= 1100);
    }
  });
  Case("tsc clock: a TSC that goes back (a migrated VM) makes it start over from the real clock", [&] {
    reset();
    Clock clock(true);
    clock.Now();
    FakeClocks::Advance(1500000);
    clock.Now();
    EXPECT(clock.calibrated());
    FakeClocks::ticks -= 1000000;
    FakeClocks::Advance(100);
    EXPECT(clock.Now() == FakeClocks::ns && !clock.calibrated());
    FakeClocks::Advance(1500000);
    EXPECT(clock.Now() == FakeClocks::ns && clock.calibrated());
  });
  Case("tsc clock: a reading interrupted between its two tick reads gives no rate; the next one does", [&] {
    reset();
    Clock clock(true);
    clock.Now();
    FakeClocks::Advance(1500000);
    FakeClocks::interrupted_ns = 10000;  // 25,000 ticks between the tick reads, over kMaxPairTicks
    EXPECT(clock.Now() == FakeClocks::ns && !clock.calibrated());
    FakeClocks::interrupted_ns = 0;
    EXPECT(clock.Now() == FakeClocks::ns && clock.calibrated());
    FakeClocks::ticks += 25000;  // 10 µs at the rate taken: the interrupted reading did not skew it
    EXPECT(distance(clock.Now(), FakeClocks::ns + 10000) <= 1);
  });
  Case("tsc clock: on this machine's clock, across anchors, each reading lies within 5 µs of the MonotonicNs() pair around it", [&] {
    TscClock clock(TscClockUsable());
    uint64_t outside = 0;
    uint64_t readings = 0;
    const uint64_t end = MonotonicNs() + 30000000;  // 30 ms: fifteen anchors
    while (MonotonicNs() < end) {
      // A preemption between the reads only widens [before, after]: the bound holds on any machine.
      const uint64_t before = MonotonicNs();
      const uint64_t read = clock.Now();
      const uint64_t after = MonotonicNs();
      if (read + 5000 < before || read > after + 5000) outside++;
      readings++;
      if (readings % 1000 == 0) usleep(200);
    }
    EXPECT(outside == 0 && readings > 1000);
    EXPECT(clock.calibrated() == TscClockUsable());
    EXPECT(Elapsed(5, 3) == 0 && Elapsed(3, 5) == 2);
  });
}

void HandoffFormatCases() {
  using handoff::FormatVersions;
  Case("handoff hello: this release's hello names what it reads, and reads back to the same versions", [] {
    const FormatVersions mine{{handoff::kFrameVersion}, {InFlightJournal::kFormatVersion}, {handoff::kRecordsVersion}};
    const std::string hello = handoff::HelloText(42, mine);
    EXPECT(hello == "{\"pid\":42,\"reads\":{\"frames\":[1],\"journal\":[2],\"records\":[1]}}");
    FormatVersions read;
    std::string error;
    EXPECT(handoff::ParseHelloReads(hello, &read, &error));
    EXPECT(read.frames == mine.frames && read.journals == mine.journals && read.records == mine.records);
    EXPECT(read.ReadsRecordsFile());
    EXPECT(handoff::FormatMismatch(read, handoff::kFrameVersion, InFlightJournal::kFormatVersion).empty());
  });
  Case("handoff hello: a release before 0.2.0 sends only its pid and reads frames 1 and journal 2 (taken over, not refused)", [] {
    FormatVersions read;
    std::string error;
    EXPECT(handoff::ParseHelloReads("{\"pid\":4711}", &read, &error));
    EXPECT(read.frames == std::vector<uint32_t>{1} && read.journals == std::vector<uint32_t>{2});
    EXPECT(!read.ReadsRecordsFile());  // it is handed a memfd per container record
    EXPECT(handoff::FormatMismatch(read, 1, 2).empty());
    // A later release that writes journal 3 must refuse it.
    EXPECT(handoff::FormatMismatch(read, 1, 3) == "it reads in-flight journal version(s) [2], this data plane writes 3");
  });
  Case("handoff hello: a successor that reads other versions is refused with both reasons; one reading several is not", [] {
    FormatVersions read;
    std::string error;
    EXPECT(handoff::ParseHelloReads("{\"pid\":7,\"reads\":{\"frames\":[2],\"journal\":[3,4]}}", &read, &error));
    EXPECT(handoff::FormatMismatch(read, 1, 2) ==
           "it reads handoff frame version(s) [2], this data plane writes 1, and reads in-flight journal version(s) [3,4], this data plane writes 2");
    EXPECT(handoff::ParseHelloReads("{\"pid\":7,\"reads\":{\"frames\":[1,2],\"journal\":[2,3]}}", &read, &error));
    EXPECT(handoff::FormatMismatch(read, 1, 2).empty() && handoff::FormatMismatch(read, 2, 3).empty());
    EXPECT(!read.ReadsRecordsFile());  // reads no records file: gets memfds
    EXPECT(handoff::ParseHelloReads("{\"pid\":7,\"reads\":{\"frames\":[1],\"journal\":[2],\"records\":[2]}}", &read, &error));
    EXPECT(!read.ReadsRecordsFile());  // another records version only: memfds too
  });
  Case("handoff hello: a hello that is not one, or names its versions in an unknown shape, is an error (never taken as legacy)", [] {
    FormatVersions read;
    std::string error;
    EXPECT(!handoff::ParseHelloReads("", &read, &error));
    EXPECT(!handoff::ParseHelloReads("pid=3", &read, &error));
    EXPECT(!handoff::ParseHelloReads("{\"pid\":7,\"reads\":{\"journal\":[2]}}", &read, &error));
    EXPECT(!handoff::ParseHelloReads("{\"pid\":7,\"reads\":{\"frames\":[1],\"journal\":[\"2\"]}}", &read, &error));
    EXPECT(!handoff::ParseHelloReads("{\"pid\":7,\"reads\":{\"frames\":[1],\"journal\":[2}}", &read, &error));
    EXPECT(!handoff::ParseHelloReads("{\"pid\":7,\"reads\":{\"frames\":[1],\"journal\":[2],\"records\":[x]}}", &read, &error));
    EXPECT(error.find("shape") != std::string::npos);
  });
}

// The events dataplane/event-decoder.test.ts expects, in order: every type, every field set to
// something other than its default, every emulated kind, every drop reason.
std::vector<Event> SampleBatch(std::string* arena) {
  auto text = [arena](const std::string& bytes) {
    TextRef ref{static_cast<uint32_t>(arena->size()), static_cast<uint32_t>(bytes.size())};
    arena->append(bytes);
    return ref;
  };
  std::vector<Event> events;
  // A new event of `type`, as a reference that holds until the next add.
  auto add = [&events](EventType type) -> Event& {
    events.emplace_back();
    events.back().type = type;
    return events.back();
  };
  Event& n = add(EventType::kNotification);
  n.handle = 7;
  n.id = 0x8877665544332211ull;
  n.pid = 4242;
  n.nr = 83;
  n.arch = AUDIT_ARCH_X86_64;
  n.ip = 0x401000;
  for (int i = 0; i < 6; i++) n.args[i] = i + 1;
  n.args[2] = UINT64_MAX;
  n.string_count = 2;
  n.strings[0] = StringArg{0, false, text("/tmp/a")};
  n.strings[1] = StringArg{5, true, text(std::string("\xff\xfe/x", 4))};
  n.forwarded = true;
  n.via_channel = true;
  n.session = 3;
  n.ns = 1000;
  Event& plain = add(EventType::kNotification);  // answered natively, no string argument
  plain.handle = 8;
  plain.id = 1;
  plain.nr = 39;
  plain.arch = AUDIT_ARCH_I386;
  plain.ns = 2000;
  Event& fast = add(EventType::kAnswered);
  fast.handle = 7;
  fast.id = 0x8877665544332211ull;
  fast.by = AnsweredBy::kFastPath;
  fast.rule = 2;
  fast.action = Answer{Answer::kError, 13, 0};
  fast.ns = 500;
  fast.notified = true;
  fast.nr = 2;
  fast.arch = AUDIT_ARCH_I386;
  Event& value = add(EventType::kAnswered);
  value.handle = 8;
  value.id = 1;
  value.by = AnsweredBy::kControlPlane;
  value.action = Answer{Answer::kValue, 0, -5};
  value.gone = true;
  value.ns = 600;
  Event& recovered = add(EventType::kAnswered);
  recovered = events[events.size() - 2];
  recovered.action = Answer();
  recovered.by = AnsweredBy::kRecovered;
  recovered.gone = false;
  for (size_t i = 0; i < kEmulationCount; ++i) {
    Event& a = add(EventType::kAnswered);
    a.handle = 9;
    a.id = 100 + i;
    a.by = AnsweredBy::kControlPlane;
    a.emulated = kEmulations[i].kind;
    a.action = Answer{Answer::kError, static_cast<int32_t>(i), static_cast<int64_t>(i) - 1};
    a.ns = 700 + i;
  }
  Event& c = add(EventType::kConnection);
  c.conn = 5;
  c.text = text("{\"id\":\"caf\xc3\xa9\"}");
  c.fd_count = 3;
  c.seccomp_mask = 0x5;
  c.peer = Peer{-1, 1000, 1001};
  for (const char* code : {"too-large", static_cast<const char*>(nullptr)}) {
    Event& ie = add(EventType::kIngestError);
    ie.text = text(code != nullptr ? "message too large" : "read failed");
    ie.code = code;
    ie.peer = Peer{77, 0, 0};
  }
  add(EventType::kRemoved).handle = 9;
  add(EventType::kError).text = text("boom");
  for (DropReason reason : {DropReason::kUnknown, DropReason::kLate, DropReason::kWrongSession, DropReason::kInvalid}) {
    Event& d = add(EventType::kDecisionDropped);
    d.session = 4;
    d.handle = 7;
    d.id = 99;
    d.drop_reason = reason;
  }
  add(EventType::kSessionDrained).session = 5;
  for (bool connected : {true, false}) {
    Event& ch = add(EventType::kChannel);
    ch.session = 6;
    ch.connected = connected;
    if (!connected) ch.text = text("peer hung up");
  }
  Event& h = add(EventType::kHandoff);
  h.conn = 11;
  h.peer = Peer{12, 13, 14};
  Event& t = add(EventType::kTally);
  t.handle = 7;
  t.nr = 2;
  t.arch = AUDIT_ARCH_X86_64;
  t.by = AnsweredBy::kNoControlPlane;
  t.gone = true;
  t.id = 17;
  t.ns = 123456;
  const uint32_t buckets[3] = {1, 0, 16};
  t.text = text(std::string(reinterpret_cast<const char*>(buckets), sizeof buckets));
  for (bool returned : {false, true}) {
    Event& r = add(EventType::kReadStall);
    r.handle = 12;
    r.pid = 4343;
    r.id = 1;
    r.ns = returned ? 2500000000ull : 51000000ull;
    r.returned = returned;
    if (returned) {
      r.nr = 39;
      r.arch = AUDIT_ARCH_I386;
    }
  }
  return events;
}

std::string Hex(const void* data, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < size; i++) {
    const uint8_t byte = static_cast<const uint8_t*>(data)[i];
    out += kDigits[byte >> 4];
    out += kDigits[byte & 15];
  }
  return out;
}

// --encode-events: the sample batch as DeliverBatch hands it to JS, one part a line in hex:
// "count N", "w64 ...", "w32 ...", "text ..." per text, "raw ...".
int PrintSampleBatch() {
  std::string arena;
  const std::vector<Event> events = SampleBatch(&arena);
  std::vector<uint64_t> w64(events.size() * event_layout::W64_WORDS);
  std::vector<uint32_t> w32(events.size() * event_layout::W32_WORDS);
  std::vector<EventBytes> texts, raws;
  for (size_t i = 0; i < events.size(); i++) {
    EncodeEvent(events[i], arena, &w64[i * event_layout::W64_WORDS], &w32[i * event_layout::W32_WORDS], &texts, &raws);
  }
  printf("count %zu\n", events.size());
  printf("w64 %s\n", Hex(w64.data(), w64.size() * sizeof(uint64_t)).c_str());
  printf("w32 %s\n", Hex(w32.data(), w32.size() * sizeof(uint32_t)).c_str());
  for (const EventBytes& t : texts) printf("text %s\n", Hex(t.first, t.second).c_str());
  std::string raw;
  for (const EventBytes& r : raws) raw.append(r.first, r.second);
  printf("raw %s\n", Hex(raw.data(), raw.size()).c_str());
  return 0;
}

}  // namespace

// One container's advisor fed by hand: `windows` windows of WakeModeAdvisor::kWindow
// notifications from `callers` threads in turn, `gap_ns` apart; Feed returns the changes it asked
// for, each applied as the engine does.
struct AdvisorRun {
  WakeModeAdvisor advisor;
  uint64_t now = 1000000000;
  uint32_t spread_at = WakeModeAdvisor::SpreadAt(2);

  std::vector<WakeModeAdvisor::Mode> Feed(int windows, uint32_t callers, uint64_t gap_ns = 1000, bool alone = true) {
    std::vector<WakeModeAdvisor::Mode> changes;
    for (uint32_t i = 0; i < static_cast<uint32_t>(windows) * WakeModeAdvisor::kWindow; i++) {
      now += gap_ns;
      WakeModeAdvisor::Mode mode;
      if (advisor.Add(1000 + i % callers, now) && advisor.Decide(spread_at, alone, &mode)) {
        advisor.Set(mode);
        changes.push_back(mode);
      }
    }
    return changes;
  }
};

void WakeModeCases() {
  using Mode = WakeModeAdvisor::Mode;
  const std::vector<Mode> none;
  const std::vector<Mode> spread{Mode::kSpread};
  const std::vector<Mode> sync{Mode::kSync};
  Case("wake mode: from twice the CPUs (4 on 2), none past 16 CPUs", [] {
    EXPECT(WakeModeAdvisor::SpreadAt(2) == 4);
    EXPECT(WakeModeAdvisor::SpreadAt(16) == 32);
    EXPECT(WakeModeAdvisor::SpreadAt(17) == 0);
    EXPECT(WakeModeAdvisor::SpreadAt(0) == 0);
  });
  Case("wake mode: one busy caller, or three (between the marks), stays sync", [&] {
    AdvisorRun run;
    EXPECT(run.Feed(50, 1) == none && run.Feed(50, 3) == none);
    EXPECT(run.advisor.mode() == Mode::kSync);
  });
  Case("wake mode: eight busy callers are spread after two windows, not one; two callers bring it back after sixteen", [&] {
    AdvisorRun run;
    EXPECT(run.Feed(1, 8) == none && run.Feed(1, 8) == spread);
    EXPECT(run.Feed(20, 8) == none && run.Feed(20, 3) == none);  // three: between the marks, as it is
    EXPECT(run.advisor.mode() == Mode::kSpread);
    // Spread, pairs of windows with two callers come and go: they change nothing.
    for (int i = 0; i < 10; i++) EXPECT(run.Feed(2, 2) == none && run.Feed(1, 8) == none);
    EXPECT(run.Feed(15, 2) == none && run.Feed(1, 2) == sync);
  });
  Case("wake mode: a contrary window starts the count again", [&] {
    AdvisorRun run;
    for (int i = 0; i < 10; i++) EXPECT(run.Feed(1, 8) == none && run.Feed(1, 1) == none);
    EXPECT(run.advisor.mode() == Mode::kSync);
  });
  Case("wake mode: many callers slower than 50,000 a second stay sync, and a spread container slowing down goes back", [&] {
    AdvisorRun run;
    // 32 notifications 21 µs apart span 651 µs, past the 640 µs of a busy window; 19 µs, 589 µs.
    EXPECT(run.Feed(20, 8, 21000) == none);
    EXPECT(run.Feed(2, 8, 19000) == spread);
    EXPECT(run.Feed(1, 8, 21000) == none && run.Feed(1, 8, 21000) == sync);
  });
  Case("wake mode: eight busy callers stay sync while another container calls, and go back to sync once one does", [&] {
    AdvisorRun run;
    EXPECT(run.Feed(20, 8, 1000, false) == none);
    EXPECT(run.Feed(2, 8) == spread);
    EXPECT(run.Feed(1, 8, 1000, false) == none && run.Feed(1, 8, 1000, false) == sync);
    // Few callers, then a slow window or another's call: the last two decide, not the count.
    EXPECT(run.Feed(2, 8) == spread && run.Feed(5, 2) == none);
    EXPECT(run.Feed(1, 8, 1000, false) == none && run.Feed(1, 8, 1000, false) == sync);
  });
  Case("wake mode: restarted (a failed handoff), a spread container is sync and counts from nothing again", [&] {
    AdvisorRun run;
    EXPECT(run.Feed(2, 8) == spread);
    // Half a window of eight callers before: a restart drops it, and the next two whole windows decide.
    for (uint32_t i = 0; i < WakeModeAdvisor::kWindow / 2; i++) run.advisor.Add(1000 + i % 8, run.now += 1000);
    run.advisor.Restart();
    EXPECT(run.advisor.mode() == Mode::kSync);
    EXPECT(run.Feed(1, 8) == none && run.Feed(1, 8) == spread);
  });
  Case("wake mode: with no mark (more than 16 CPUs) nothing changes", [&] {
    AdvisorRun run;
    run.spread_at = WakeModeAdvisor::SpreadAt(17);
    EXPECT(run.Feed(20, 32, 100) == none);
    EXPECT(run.advisor.mode() == Mode::kSync);
  });
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--encode-events") == 0) return PrintSampleBatch();
  JournalCases();
  PendingTableCases();
  DecisionCheckCases();
  EmulationTableCases();
  RuleTableCases();
  RuleCaseFileCases();
  BoundaryCases();
  CgroupPathCases();
  TallyCases();
  ProcStatusCases();
  MountKeyCases();
  AnswerCases();
  NotifyFdCases();
  RecordCases();
  RecordFileCases();
  HandoffFormatCases();
  TscClockCases();
  WakeModeCases();
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
