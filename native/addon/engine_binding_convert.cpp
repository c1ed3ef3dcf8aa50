// Conversions between the engine's C++ structs and JS objects (engine_binding_convert.hpp).
#include "engine_binding_convert.hpp"

#include "binding_args.hpp"

namespace seccomp_agent {

bool ParseEngineOptions(Napi::Env env, Napi::Object opts, Engine::Options* out) {
  Engine::Options& o = *out;
  Napi::Value action = opts.Get("defaultAction");
  if (env.IsExceptionPending() || !ParseAnswer(env, action, false, &o.default_action)) return false;
  double timeout_ms = -1;
  if (!OptionalNumber(opts, "decisionTimeoutMs", 0, &timeout_ms)) return false;
  if (timeout_ms < 0) {
    ThrowType(env, "option decisionTimeoutMs is required");
    return false;
  }
  o.decision_timeout_ns = static_cast<uint64_t>(timeout_ms * 1e6);
  double v = static_cast<double>(o.batch_delay_ns) / 1e3;
  if (!OptionalNumber(opts, "batchDelayUs", 0, &v)) return false;
  o.batch_delay_ns = static_cast<uint64_t>(v * 1e3);
  v = 0;
  if (!OptionalNumber(opts, "busyPollUs", 0, &v)) return false;
  o.busy_poll_ns = static_cast<uint64_t>(v * 1e3);
  v = static_cast<double>(o.ingest_timeout_ns) / 1e6;
  if (!OptionalNumber(opts, "ingestTimeoutMs", 1, &v)) return false;
  o.ingest_timeout_ns = static_cast<uint64_t>(v * 1e6);
  v = static_cast<double>(o.ingest_max_bytes);
  if (!OptionalNumber(opts, "ingestMaxBytes", 1, &v)) return false;
  o.ingest_max_bytes = static_cast<size_t>(v);
  v = static_cast<double>(o.max_queued_events);
  if (!OptionalNumber(opts, "maxQueuedEvents", 1, &v)) return false;
  o.max_queued_events = static_cast<size_t>(v);
  v = static_cast<double>(o.lanes);
  if (!OptionalNumber(opts, "lanes", 1, &v)) return false;
  if (v > 64) {
    ThrowRange(env, "option lanes is at most 64");
    return false;
  }
  o.lanes = static_cast<size_t>(v);
  Napi::Value fd_tables = opts.Get("laneFdTables");
  if (env.IsExceptionPending()) return false;
  if (!fd_tables.IsUndefined()) {
    if (!fd_tables.IsBoolean()) {
      ThrowType(env, "option laneFdTables must be a boolean");
      return false;
    }
    o.lane_fd_tables = fd_tables.As<Napi::Boolean>().Value();
  }
  Napi::Value helper = opts.Get("helperPath");
  if (env.IsExceptionPending()) return false;
  if (!helper.IsString()) {
    ThrowType(env, "option helperPath must be a string (the path of seccomp-nshelper)");
    return false;
  }
  o.helper_path = helper.As<Napi::String>().Utf8Value();
  return true;
}

Napi::Object StatsObject(Napi::Env env, const Engine::Stats& s, bool fd_store, const Ingest::DropCounts& d) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("containers", Napi::Number::New(env, static_cast<double>(s.containers)));
  o.Set("pending", Napi::Number::New(env, static_cast<double>(s.pending)));
  o.Set("pendingConnections", Napi::Number::New(env, static_cast<double>(s.pending_connections)));
  o.Set("eventsDropped", Napi::Number::New(env, static_cast<double>(s.events_dropped)));
  o.Set("syncWakeUp", Napi::Boolean::New(env, s.sync_wake_up));
  o.Set("emulationHelpers", Napi::Number::New(env, static_cast<double>(s.emulation_helpers)));
  o.Set("channelDecisions", Napi::Number::New(env, static_cast<double>(s.channel_decisions)));
  o.Set("decisionsDropped", Napi::Number::New(env, static_cast<double>(s.decisions_dropped)));
  o.Set("emulationsReplayed", Napi::Number::New(env, static_cast<double>(s.emulations_replayed)));
  o.Set("spreadWakeContainers", Napi::Number::New(env, static_cast<double>(s.spread_wake_containers)));
  o.Set("wakeModeSwitches", Napi::Number::New(env, static_cast<double>(s.wake_mode_switches)));
  o.Set("emulationHelpersDied", Napi::Number::New(env, static_cast<double>(s.emulation_helpers_died)));
  o.Set("emulationsRetried", Napi::Number::New(env, static_cast<double>(s.emulations_retried)));
  o.Set("readStalls", Napi::Number::New(env, static_cast<double>(s.read_stalls)));
  Napi::Object predecessor = Napi::Object::New(env);
  predecessor.Set("waiting", Napi::Number::New(env, static_cast<double>(s.predecessor_waiting)));
  predecessor.Set("answered", Napi::Number::New(env, static_cast<double>(s.predecessor_answered)));
  predecessor.Set("redecided", Napi::Number::New(env, static_cast<double>(s.predecessor_redecided)));
  predecessor.Set("timedOut", Napi::Number::New(env, static_cast<double>(s.predecessor_timed_out)));
  o.Set("predecessorEmulations", predecessor);
  Napi::Array lanes = Napi::Array::New(env, s.lanes.size());
  for (size_t i = 0; i < s.lanes.size(); i++) {
    Napi::Object lane = Napi::Object::New(env);
    lane.Set("containers", Napi::Number::New(env, static_cast<double>(s.lanes[i].containers)));
    lane.Set("received", Napi::Number::New(env, static_cast<double>(s.lanes[i].received)));
    lane.Set("ownFdTable", Napi::Boolean::New(env, s.lanes[i].own_fd_table));
    lanes.Set(static_cast<uint32_t>(i), lane);
  }
  o.Set("lanes", lanes);
  o.Set("fdStore", Napi::Boolean::New(env, fd_store));
  Napi::Object dropped = Napi::Object::New(env);
  dropped.Set("perPid", Napi::Number::New(env, static_cast<double>(d.per_pid)));
  dropped.Set("perUid", Napi::Number::New(env, static_cast<double>(d.per_uid)));
  dropped.Set("total", Napi::Number::New(env, static_cast<double>(d.total)));
  dropped.Set("fdReserve", Napi::Number::New(env, static_cast<double>(d.fd_reserve)));
  o.Set("ingestDropped", dropped);
  return o;
}

Napi::Object RestoreObject(Napi::Env env, const Engine::RestoreResult& r, size_t container_count) {
  Napi::Object o = Napi::Object::New(env);
  Napi::Array problems = Napi::Array::New(env, r.problems.size());
  for (size_t i = 0; i < r.problems.size(); i++) problems.Set(static_cast<uint32_t>(i), Napi::String::New(env, r.problems[i]));
  o.Set("containerCount", Napi::Number::New(env, static_cast<double>(container_count)));
  o.Set("listener", Napi::Boolean::New(env, r.listener));
  Napi::Array listener_paths = Napi::Array::New(env, r.listener_paths.size());
  for (size_t i = 0; i < r.listener_paths.size(); i++) listener_paths.Set(static_cast<uint32_t>(i), Napi::String::New(env, r.listener_paths[i]));
  o.Set("listenerPaths", listener_paths);
  o.Set("journal", Napi::Boolean::New(env, r.journal));
  o.Set("controlPlaneAttached", Napi::Boolean::New(env, r.control_plane_attached));
  o.Set("inFlightAnswered", Napi::Number::New(env, static_cast<double>(r.in_flight_answered)));
  o.Set("inFlightHeld", Napi::Number::New(env, static_cast<double>(r.in_flight_held)));
  o.Set("lostAnswered", Napi::Number::New(env, static_cast<double>(r.lost_answered)));
  o.Set("inFlightByRules", Napi::Number::New(env, static_cast<double>(r.in_flight_by_rules)));
  o.Set("inFlightWithHelper", Napi::Number::New(env, static_cast<double>(r.in_flight_with_helper)));
  o.Set("problems", problems);
  return o;
}

}  // namespace seccomp_agent
