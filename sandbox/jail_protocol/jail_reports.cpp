#include "sandbox/jail_protocol/jail_reports.hpp"

#include "sandbox/jail_protocol/jail_channel.hpp"

namespace belljar {

namespace {

enum class ReportKind { ready, error, exit, survey, refusal };

const char* report_kind_name(ReportKind kind) {
  switch (kind) {
    case ReportKind::ready:
      return "ready";
    case ReportKind::error:
      return "error";
    case ReportKind::exit:
      return "exit";
    case ReportKind::survey:
      return "survey";
    case ReportKind::refusal:
      return "refusal";
  }
  return "error";
}

std::optional<ReportKind> report_kind_from(std::string_view name) {
  for (auto kind : {ReportKind::ready, ReportKind::error, ReportKind::exit, ReportKind::survey,
                    ReportKind::refusal})
    if (name == report_kind_name(kind)) return kind;
  return std::nullopt;
}

GuardKind guard_kind_from(std::string_view name) {
  for (auto kind : {GuardKind::mask, GuardKind::read_only})
    if (name == guard_kind_name(kind)) return kind;
  throw RecordError{"field \"guard\": unknown kind \"" + std::string(name) + "\""};
}

int int_field(const Record& record, const char* name, int fallback) {
  int64_t value = record.signed_or(name, fallback);
  if (value < -1 || value > 65535)
    throw RecordError{std::string("field \"") + name + "\" is out of range"};
  return static_cast<int>(value);
}

Record parse(std::string_view bytes) {
  RecordError error;
  auto record = Record::parse(bytes, &error);
  if (!record) throw error;
  return *record;
}

std::optional<uint64_t> optional_number(const Record& record, const char* name) {
  if (!record.has(name)) return std::nullopt;
  return record.required_number(name);
}

struct Encoder {
  RecordWriter operator()(const ReadyReport& r) const {
    RecordWriter out;
    out.text("event", report_kind_name(ReportKind::ready));
    if (r.worker_pid > 0) out.number("worker_pid", static_cast<uint64_t>(r.worker_pid));
    out.text("cgroup_v2", r.cgroup.v2)
        .text("cgroup_memory", r.cgroup.memory)
        .text("cgroup_pids", r.cgroup.pids)
        .text("cgroup_cpuacct", r.cgroup.cpuacct)
        .texts("note", r.notes);
    return out;
  }
  RecordWriter operator()(const ErrorReport& r) const {
    RecordWriter out;
    out.text("event", report_kind_name(ReportKind::error)).text("message", r.message);
    return out;
  }
  RecordWriter operator()(const ExitReport& r) const {
    RecordWriter out;
    out.text("event", report_kind_name(ReportKind::exit))
        .signed_number("code", r.code)
        .signed_number("signal", r.signal)
        .flag("memory_limit", r.memory_limit)
        .number("memory_total_bytes", r.memory_total_bytes)
        .signed_number("cpu_ns", r.cpu_ns)
        .number("peak_memory_bytes", r.peak_memory_bytes);
    return out;
  }
  RecordWriter operator()(const RefusalReport& r) const {
    RecordWriter out;
    out.text("event", report_kind_name(ReportKind::refusal))
        .text("path", r.path)
        .text("reason", r.reason);
    return out;
  }
  RecordWriter operator()(const SurveyReport& r) const {
    RecordWriter out;
    out.text("event", report_kind_name(ReportKind::survey));
    for (const auto& g : r.guarded)
      out.record("guarded", RecordWriter()
                                .text("path", g.path)
                                .text("guard", guard_kind_name(g.kind))
                                .text("reason", g.reason));
    if (r.bytes) out.number("bytes", *r.bytes);
    if (r.added_bytes) out.number("added_bytes", *r.added_bytes);
    out.number("entries", r.entries)
        .flag("over_quota", r.over_quota)
        .flag("read_only", r.read_only)
        .number("micros", r.micros);
    if (!r.busy.empty()) out.text("busy", r.busy);
    if (!r.error.empty()) out.text("error", r.error);
    return out;
  }
};

}  // namespace

const char* guard_kind_name(GuardKind kind) {
  return kind == GuardKind::mask ? "masked" : "read-only";
}

std::string encode(const JailReport& report) {
  return std::visit(Encoder{}, report).bytes();
}

bool send_report(int fd, const JailReport& report) noexcept {
  try {
    return send_frame(fd, encode(report));
  } catch (...) {
    return false;
  }
}

JailReport decode_report(std::string_view bytes) {
  Record record = parse(bytes);
  auto kind = report_kind_from(record.required_text("event"));
  if (!kind)
    throw RecordError{"field \"event\": unknown report \"" + record.required_text("event") + "\""};
  switch (*kind) {
    case ReportKind::ready: {
      ReadyReport r;
      uint64_t pid = record.number_or("worker_pid", 0);
      if (pid > 0x3fffffff) throw RecordError{"field \"worker_pid\" is out of range"};
      r.worker_pid = pid > 0 ? static_cast<pid_t>(pid) : -1;
      r.cgroup = {record.text_or("cgroup_v2", ""), record.text_or("cgroup_memory", ""),
                  record.text_or("cgroup_pids", ""), record.text_or("cgroup_cpuacct", "")};
      r.notes = record.texts("note");
      return r;
    }
    case ReportKind::error:
      return ErrorReport{record.required_text("message")};
    case ReportKind::exit: {
      ExitReport r;
      r.code = int_field(record, "code", -1);
      r.signal = int_field(record, "signal", 0);
      r.memory_limit = record.flag_or("memory_limit", false);
      r.memory_total_bytes = record.number_or("memory_total_bytes", 0);
      r.cpu_ns = record.signed_or("cpu_ns", -1);
      r.peak_memory_bytes = record.number_or("peak_memory_bytes", 0);
      return r;
    }
    case ReportKind::refusal:
      return RefusalReport{record.required_text("path"), record.required_text("reason")};
    case ReportKind::survey: {
      SurveyReport r;
      for (auto guard_bytes : record.all("guarded")) {
        Record g = parse(guard_bytes);
        r.guarded.push_back({g.required_text("path"), guard_kind_from(g.required_text("guard")),
                             g.text_or("reason", "")});
      }
      r.bytes = optional_number(record, "bytes");
      r.added_bytes = optional_number(record, "added_bytes");
      r.entries = record.number_or("entries", 0);
      r.over_quota = record.flag_or("over_quota", false);
      r.read_only = record.flag_or("read_only", false);
      r.busy = record.text_or("busy", "");
      r.error = record.text_or("error", "");
      r.micros = record.number_or("micros", 0);
      return r;
    }
  }
  throw RecordError{"unknown report"};
}

std::string SurveyRequest::encode() const {
  RecordWriter out;
  out.text("op", "survey").flag("measure", measure);
  if (baseline) out.number("baseline", *baseline);
  return out.bytes();
}

SurveyRequest SurveyRequest::decode(std::string_view bytes) {
  Record record = parse(bytes);
  if (record.required_text("op") != "survey")
    throw RecordError{"field \"op\": unknown request \"" + record.required_text("op") + "\""};
  SurveyRequest request;
  request.measure = record.flag_or("measure", false);
  request.baseline = optional_number(record, "baseline");
  return request;
}

}  // namespace belljar
