// SPDX-License-Identifier: BSD-3-Clause
#include "topology/profile.h"

#include <mpi.h>

#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <sstream>

#include "topology/machine.h"
#include "topology/mpi_error.h"

#ifndef VENEER_VERSION
#define VENEER_VERSION "unknown"
#endif

namespace veneer::topology {
namespace {

// FNV-1a, 64 bits: a stable digest (std::hash may change between builds).
uint64_t fnv1a(std::string_view text, uint64_t h = 0xcbf29ce484222325ull) {
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

// The machine as it stays from run to run: not the binding (it depends on the
// launcher's options) nor where the description came from.
std::string topology_digest(const Machine& m) {
  std::string d = std::to_string(m.packages) + "p" + std::to_string(m.numa_nodes) + "n" + std::to_string(m.cores) +
                  "c" + std::to_string(m.pus) + "t";
  for (const Cache& c : m.caches)
    d += ";L" + std::to_string(c.level) + ":" + std::to_string(c.bytes) + "x" + std::to_string(c.instances);
  for (const PciDevice& dev : m.devices)
    d += std::string(";") + (dev.kind == DeviceKind::gpu ? "gpu:" : "nic:") + dev.name + "@" +
         std::to_string(dev.numa_node);
  return hex(fnv1a(d));
}

std::string trim(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const size_t last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    // x86: "model name"; some other architectures only have "cpu model" or "Processor".
    for (const char* key : {"model name", "cpu model", "Processor"}) {
      if (line.rfind(key, 0) != 0) continue;
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  }
  return "unknown";
}

std::string library_version_text() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  // An empty text makes a fingerprint no profile matches: the built-in model serves.
  if (failed(PMPI_Get_library_version(text, &length), "MPI_Get_library_version")) return "";
  // Some libraries count the terminating NUL in `length`: stop at the first one.
  const size_t n = static_cast<size_t>(std::max(0, std::min(length, MPI_MAX_LIBRARY_VERSION_STRING)));
  return {text, strnlen(text, n)};
}

std::string transport_of(const std::string& version) {
  if (version.rfind("Open MPI", 0) == 0) {
    const char* pml = std::getenv("OMPI_MCA_pml");
    return std::string("pml ") + (pml && *pml ? pml : "ob1");
  }
  const size_t at = version.find("MPICH Device:");
  if (at != std::string::npos) {
    const size_t end = version.find('\n', at);
    return trim(version.substr(at + 13, end == std::string::npos ? std::string::npos : end - at - 13));
  }
  return "unknown";
}

// ---- Reading, with a path to the offending member in every error ------------

struct Reader {
  std::string error;

  bool fail(const std::string& where, const char* what) {
    if (error.empty()) error = where + ": " + what;
    return false;
  }
  bool string(const json::Document& obj, const char* key, const std::string& where, std::string& out, bool required) {
    const json::Document* v = json::find(obj, key);
    if (!v) return required ? fail(where + "." + key, "missing") : true;
    if (!v->is_string()) return fail(where + "." + key, "expected a string");
    out = v->get<std::string>();
    return true;
  }
  bool number(const json::Document& obj, const char* key, const std::string& where, double& out, bool required,
              bool positive = false) {
    const json::Document* v = json::find(obj, key);
    if (!v) return required ? fail(where + "." + key, "missing") : true;
    const double d = v->is_number() ? v->get<double>() : -1;
    if (!std::isfinite(d) || d < 0 || (positive && d <= 0))
      return fail(where + "." + key, positive ? "expected a positive number" : "expected a number >= 0");
    out = d;
    return true;
  }
  bool integer(const json::Document& obj, const char* key, const std::string& where, int64_t& out, bool required,
               int64_t lo, int64_t hi) {
    const json::Document* v = json::find(obj, key);
    if (!v) return required ? fail(where + "." + key, "missing") : true;
    auto i = json::as_integer(*v);
    if (!i || *i < lo || *i > hi) return fail(where + "." + key, "expected an integer in range");
    out = *i;
    return true;
  }
  bool boolean(const json::Document& obj, const char* key, const std::string& where, bool& out) {
    const json::Document* v = json::find(obj, key);
    if (!v) return true;
    if (!v->is_boolean()) return fail(where + "." + key, "expected true or false");
    out = v->get<bool>();
    return true;
  }

  std::optional<LevelFit> level(const json::Document& v, const std::string& where) {
    if (!v.is_object()) return fail(where, "expected an object"), std::nullopt;
    LevelFit l;
    if (!number(v, "alpha", where, l.alpha, true) || !number(v, "beta", where, l.beta, true) ||
        !number(v, "gamma", where, l.gamma, false) || !number(v, "fit_error", where, l.fit_error, false))
      return std::nullopt;
    if (const json::Document* pts = json::find(v, "points")) {
      if (!pts->is_array()) return fail(where + ".points", "expected an array"), std::nullopt;
      size_t i = 0;
      for (const json::Document& p : *pts) {
        const std::string at = where + ".points[" + std::to_string(i++) + "]";
        if (!p.is_object()) return fail(at, "expected an object"), std::nullopt;
        LevelFit::Point pt;
        int64_t pairs = 1;
        if (!integer(p, "bytes", at, pt.bytes, true, 0, INT64_MAX) ||
            !integer(p, "pairs", at, pairs, false, 1, 1 << 20) || !number(p, "seconds", at, pt.seconds, true, true))
          return std::nullopt;
        pt.pairs = static_cast<int>(pairs);
        l.points.push_back(pt);
      }
    }
    return l;
  }

  bool timing(const json::Document& obj, const char* key, const std::string& where, Timing& out) {
    const json::Document* t = json::find(obj, key);
    const std::string at = where + "." + key;
    if (!t) return fail(at, "missing");
    if (!t->is_object()) return fail(at, "expected an object");
    return number(*t, "median", at, out.median, true, true) && number(*t, "spread", at, out.spread, false);
  }

  std::optional<P2pLevel> p2p_level(const json::Document& v, const std::string& where) {
    if (!v.is_object()) return fail(where, "expected an object"), std::nullopt;
    P2pLevel l;
    if (!integer(v, "max_block", where, l.max_block, true, 0, INT64_MAX)) return std::nullopt;
    if (const json::Document* pts = json::find(v, "points")) {
      if (!pts->is_array()) return fail(where + ".points", "expected an array"), std::nullopt;
      size_t i = 0;
      for (const json::Document& p : *pts) {
        const std::string at = where + ".points[" + std::to_string(i++) + "]";
        if (!p.is_object()) return fail(at, "expected an object"), std::nullopt;
        P2pPoint pt;
        if (!integer(p, "block", at, pt.block, true, 1, INT64_MAX) ||
            !integer(p, "bytes", at, pt.bytes, true, 1, INT64_MAX) || !timing(p, "library", at, pt.library) ||
            !timing(p, "veneer", at, pt.veneer))
          return std::nullopt;
        l.points.push_back(pt);
      }
    }
    return l;
  }

  std::optional<CollectivePoint> point(const json::Document& v, const std::string& where) {
    if (!v.is_object()) return fail(where, "expected an object"), std::nullopt;
    CollectivePoint c;
    int64_t ranks = 0, nodes = 0, rpn = 0, min_rpn = -1;
    if (!string(v, "collective", where, c.collective, true) || !integer(v, "ranks", where, ranks, true, 1, 1 << 24) ||
        !integer(v, "nodes", where, nodes, true, 1, 1 << 24) ||
        !integer(v, "ranks_per_node", where, rpn, true, 1, 1 << 24) ||
        !integer(v, "min_ranks_per_node", where, min_rpn, false, 1, 1 << 24) ||
        !boolean(v, "node_consecutive", where, c.node_consecutive) ||
        !integer(v, "bytes", where, c.bytes, true, 1, INT64_MAX))
      return std::nullopt;
    c.ranks = static_cast<int>(ranks);
    c.nodes = static_cast<int>(nodes);
    c.ranks_per_node = static_cast<int>(rpn);
    c.min_ranks_per_node = min_rpn < 0 ? c.ranks_per_node : static_cast<int>(min_rpn);
    const json::Document* times = json::find(v, "times");
    if (!times) return fail(where + ".times", "missing"), std::nullopt;
    if (!times->is_object()) return fail(where + ".times", "expected an object"), std::nullopt;
    for (const auto& [name, t] : times->items()) {
      std::string at = where;
      at.append(".times.").append(name);
      if (!t.is_object()) return fail(at, "expected an object"), std::nullopt;
      Timing timing;
      if (!number(t, "median", at, timing.median, true, true) || !number(t, "spread", at, timing.spread, false) ||
          !number(t, "returned", at, timing.returned, false) || !number(t, "patterns", at, timing.patterns, false) ||
          !number(t, "rotating", at, timing.rotating, false))
        return std::nullopt;
      c.times.emplace_back(name, timing);
    }
    return c;
  }
};

json::Document level_json(const LevelFit& l) {
  json::Document v = {{"alpha", l.alpha}, {"beta", l.beta}, {"gamma", l.gamma}, {"fit_error", l.fit_error}};
  if (!l.points.empty()) {
    json::Document pts = json::Document::array();
    for (const LevelFit::Point& p : l.points)
      pts.push_back({{"bytes", p.bytes}, {"pairs", p.pairs}, {"seconds", p.seconds}});
    v["points"] = std::move(pts);
  }
  return v;
}

json::Document timing_json(const Timing& t) {
  json::Document v = {{"median", t.median}, {"spread", t.spread}};
  if (t.returned > 0) v["returned"] = t.returned;
  if (t.patterns > 0) v["patterns"] = t.patterns;
  if (t.rotating > 0) v["rotating"] = t.rotating;
  return v;
}

json::Document p2p_level_json(const P2pLevel& l) {
  json::Document pts = json::Document::array();
  for (const P2pPoint& p : l.points)
    pts.push_back({{"block", p.block},
                   {"bytes", p.bytes},
                   {"library", timing_json(p.library)},
                   {"veneer", timing_json(p.veneer)}});
  return {{"max_block", l.max_block}, {"points", std::move(pts)}};
}

ProfileCheck refuse(ProfileStatus status, std::string why) {
  ProfileCheck c;
  c.status = status;
  c.why = std::move(why);
  return c;
}

bool make_directories(const std::string& dir) {
  if (dir.empty()) return true;
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) return S_ISDIR(st.st_mode);
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0 && !make_directories(dir.substr(0, slash))) return false;
  return ::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST;
}

}  // namespace

std::string Fingerprint::digest() const {
  uint64_t h = fnv1a(topology);
  for (const std::string* s : {&cpu, &mpi, &transport, &veneer}) h = fnv1a(*s, fnv1a("|", h));
  return hex(h);
}

Fingerprint current_fingerprint() {
  Fingerprint f;
  f.topology = topology_digest(machine());
  f.cpu = cpu_model();
  const std::string version = library_version_text();
  f.mpi = trim(version.substr(0, version.find('\n')));
  f.transport = transport_of(version);
  f.veneer = VENEER_VERSION;
  return f;
}

P2pOutcome p2p_outcome(const P2pPoint& p) {
  const double lib = p.library.median, ven = p.veneer.median;
  if (lib <= 0 || ven <= 0) return P2pOutcome::tie;
  if (ven * (1 + p.veneer.spread) < lib * (1 - p.library.spread)) return P2pOutcome::win;
  if (lib * (1 + p.library.spread) < ven * (1 - p.veneer.spread)) return P2pOutcome::loss;
  return P2pOutcome::tie;
}

int64_t p2p_max_block(const std::vector<P2pPoint>& points, double small_loss) {
  std::vector<int64_t> blocks;
  blocks.reserve(points.size());
  for (const P2pPoint& p : points) blocks.push_back(p.block);
  std::sort(blocks.begin(), blocks.end());
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  int64_t threshold = 0;
  for (const int64_t block : blocks) {
    int sizes = 0, wins = 0, losses = 0;
    bool large_loss = false;
    for (const P2pPoint& p : points) {
      if (p.block != block || p.library.median <= 0 || p.veneer.median <= 0) continue;
      ++sizes;
      const P2pOutcome o = p2p_outcome(p);
      wins += o == P2pOutcome::win;
      losses += o == P2pOutcome::loss;
      if (o == P2pOutcome::loss && p.veneer.median > (1 + small_loss) * p.library.median) large_loss = true;
    }
    if (sizes == 0) continue;
    if (large_loss || 2 * losses >= sizes) break;  // hurts: nothing at or above it is taken over
    if (2 * wins > sizes) threshold = block;       // pays
  }
  return threshold;
}

std::optional<int64_t> P2pProfile::takeover_max_block() const {
  if (inter) return inter->max_block;
  if (intra) return intra->max_block;
  return std::nullopt;
}

std::string_view status_name(ProfileStatus s) {
  switch (s) {
    case ProfileStatus::loaded: return "loaded";
    case ProfileStatus::missing: return "missing";
    case ProfileStatus::unreadable: return "unreadable";
    case ProfileStatus::corrupt: return "corrupt";
    case ProfileStatus::outdated: return "outdated";
    case ProfileStatus::foreign: return "foreign";
    case ProfileStatus::off: return "off";
  }
  return "?";
}

json::Document to_json(const Profile& p) {
  json::Document v = {{"format", profile_format}, {"version", profile_version}};
  v["fingerprint"] = {{"topology", p.fingerprint.topology},
                      {"cpu", p.fingerprint.cpu},
                      {"mpi", p.fingerprint.mpi},
                      {"transport", p.fingerprint.transport},
                      {"veneer", p.fingerprint.veneer}};
  v["created"] = p.created;
  if (!p.machine.empty()) v["machine"] = p.machine;
  if (!p.calibration.is_null()) v["calibration"] = p.calibration.doc;
  json::Document levels = json::Document::object();
  if (p.intra) levels["intra"] = level_json(*p.intra);
  if (p.inter) levels["inter"] = level_json(*p.inter);
  v["levels"] = std::move(levels);
  if (p.nic_streams > 0) v["nic_streams"] = p.nic_streams;
  json::Document points = json::Document::array();
  for (const CollectivePoint& c : p.collectives) {
    json::Document o = {
        {"collective", c.collective}, {"ranks", c.ranks}, {"nodes", c.nodes}, {"ranks_per_node", c.ranks_per_node}};
    if (c.min_ranks_per_node != c.ranks_per_node) o["min_ranks_per_node"] = c.min_ranks_per_node;
    if (!c.node_consecutive) o["node_consecutive"] = false;
    o["bytes"] = c.bytes;
    json::Document times = json::Document::object();
    for (const auto& [name, t] : c.times) times[name] = timing_json(t);
    o["times"] = std::move(times);
    points.push_back(std::move(o));
  }
  v["collectives"] = std::move(points);
  if (p.p2p) {
    json::Document p2p = json::Document::object();
    if (p.p2p->intra) p2p["intra"] = p2p_level_json(*p.p2p->intra);
    if (p.p2p->inter) p2p["inter"] = p2p_level_json(*p.p2p->inter);
    if (p.p2p->pack) p2p["pack"] = p2p_level_json(*p.p2p->pack);
    v["p2p"] = std::move(p2p);
  }
  return v;
}

std::string profile_text(const Profile& p) { return json::write(to_json(p), 1) + "\n"; }

namespace {

// The document is a Veneer profile of the version this Veneer reads; why not otherwise.
std::optional<ProfileCheck> refuse_header(const json::Document& doc) {
  const json::Document* format = json::find(doc, "format");
  if (!format || !format->is_string() || format->get<std::string>() != profile_format)
    return refuse(ProfileStatus::corrupt, R"(not a Veneer profile ("format" is not "veneer-profile"))");
  const json::Document* version_member = json::find(doc, "version");
  const std::optional<int64_t> version = version_member ? json::as_integer(*version_member) : std::nullopt;
  if (!version) return refuse(ProfileStatus::corrupt, "no integer \"version\"");
  if (*version != profile_version)
    return refuse(ProfileStatus::outdated, "format version " + std::to_string(*version) +
                                               ", this Veneer reads version " + std::to_string(profile_version));
  return std::nullopt;
}

// Written on this machine, with this MPI and transport, by this Veneer; why not otherwise.
std::optional<ProfileCheck> refuse_fingerprint(const Fingerprint& g, const Fingerprint& e) {
  if (g == e) return std::nullopt;
  if (g.topology == e.topology && g.cpu == e.cpu && g.mpi == e.mpi && g.transport == e.transport)
    return refuse(ProfileStatus::outdated, "written by Veneer " + g.veneer + ", this is Veneer " + e.veneer);
  std::string what = g.topology != e.topology ? "hwloc topology " + g.topology + " (here " + e.topology + ")"
                     : g.cpu != e.cpu         ? "CPU \"" + g.cpu + "\" (here \"" + e.cpu + "\")"
                     : g.mpi != e.mpi         ? "MPI \"" + g.mpi + "\" (here \"" + e.mpi + "\")"
                                              : "transport \"" + g.transport + "\" (here \"" + e.transport + "\")";
  return refuse(ProfileStatus::foreign, "measured with another " + what);
}

// The measurements: per-level costs, NIC streams, collective points, the p2p
// section. False with r.error set on the first member that is wrong.
bool read_measurements(const json::Document& doc, Reader& r, Profile& p) {
  if (const json::Document* levels = json::find(doc, "levels")) {
    if (!levels->is_object()) return r.fail("levels", "expected an object");
    if (const json::Document* intra = json::find(*levels, "intra")) {
      p.intra = r.level(*intra, "levels.intra");
      if (!p.intra) return false;
    }
    if (const json::Document* inter = json::find(*levels, "inter")) {
      p.inter = r.level(*inter, "levels.inter");
      if (!p.inter) return false;
    }
  }
  int64_t streams = 0;
  if (!r.integer(doc, "nic_streams", "profile", streams, false, 0, 1 << 20)) return false;
  p.nic_streams = static_cast<int>(streams);
  if (const json::Document* points = json::find(doc, "collectives")) {
    if (!points->is_array()) return r.fail("collectives", "expected an array");
    size_t i = 0;
    p.collectives.reserve(points->size());
    for (const json::Document& v : *points) {
      auto c = r.point(v, "collectives[" + std::to_string(i++) + "]");
      if (!c) return false;
      p.collectives.push_back(std::move(*c));
    }
  }
  if (const json::Document* p2p = json::find(doc, "p2p")) {
    if (!p2p->is_object()) return r.fail("p2p", "expected an object");
    P2pProfile section;
    for (auto [key, into] :
         {std::pair{"intra", &section.intra}, std::pair{"inter", &section.inter}, std::pair{"pack", &section.pack}}) {
      const json::Document* level = json::find(*p2p, key);
      if (!level) continue;
      *into = r.p2p_level(*level, std::string("p2p.") + key);
      if (!*into) return false;
    }
    p.p2p = std::move(section);
  }
  return true;
}

ProfileCheck check_profile_text(std::string_view text, const Fingerprint* expected) {
  json::ParseError perr;
  auto doc = json::parse(text, &perr);
  if (!doc)
    return refuse(ProfileStatus::corrupt,
                  "not JSON: " + perr.message + (perr.offset ? " at byte " + std::to_string(*perr.offset) : ""));
  if (!doc->is_object()) return refuse(ProfileStatus::corrupt, "not a JSON object");
  if (auto refused = refuse_header(*doc)) return *refused;
  Reader r;
  Profile p;
  const json::Document* fp = json::find(*doc, "fingerprint");
  if (!fp || !fp->is_object()) return refuse(ProfileStatus::corrupt, "fingerprint: missing or not an object");
  if (!r.string(*fp, "topology", "fingerprint", p.fingerprint.topology, true) ||
      !r.string(*fp, "cpu", "fingerprint", p.fingerprint.cpu, true) ||
      !r.string(*fp, "mpi", "fingerprint", p.fingerprint.mpi, true) ||
      !r.string(*fp, "transport", "fingerprint", p.fingerprint.transport, true) ||
      !r.string(*fp, "veneer", "fingerprint", p.fingerprint.veneer, true) ||
      !r.string(*doc, "created", "profile", p.created, false) ||
      !r.string(*doc, "machine", "profile", p.machine, false))
    return refuse(ProfileStatus::corrupt, r.error);
  if (expected)
    if (auto refused = refuse_fingerprint(p.fingerprint, *expected)) return *refused;
  if (const json::Document* cal = json::find(*doc, "calibration")) p.calibration.doc = *cal;
  if (!read_measurements(*doc, r, p)) return refuse(ProfileStatus::corrupt, r.error);
  ProfileCheck ok;
  ok.status = ProfileStatus::loaded;
  ok.why = "fingerprint " + p.fingerprint.digest() + ", " + std::to_string(p.collectives.size()) + " measured points";
  if (!p.created.empty()) ok.why += ", created " + p.created;
  ok.profile = std::move(p);
  return ok;
}

}  // namespace

ProfileCheck profile_from_text(std::string_view text, const Fingerprint* expected) {
  // Every member's type is checked before it is taken, so nlohmann has nothing
  // to throw; should it (or memory run out), the profile is refused here
  // rather than the exception reaching MPI_Init.
  try {
    return check_profile_text(text, expected);
  } catch (const std::exception& e) {
    return refuse(ProfileStatus::corrupt, std::string("cannot read it: ") + e.what());
  }
}

ProfileCheck read_profile(const std::string& path, const Fingerprint* expected) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return refuse(ProfileStatus::unreadable, path + " is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return refuse(ProfileStatus::missing, "no file " + path);
    return refuse(ProfileStatus::unreadable, "cannot read " + path + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return refuse(ProfileStatus::unreadable, "cannot read " + path);
  ProfileCheck c = profile_from_text(text.str(), expected);
  if (c.status != ProfileStatus::loaded) c.why = path + ": " + c.why;
  return c;
}

std::string profile_path(bool* explicit_path) {
  const char* env = std::getenv("VENEER_PROFILE");
  if (explicit_path) *explicit_path = env && *env;
  if (env && *env) return std::strcmp(env, "off") == 0 ? std::string() : std::string(env);
  std::string base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) base = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home) base = std::string(home) + "/.cache";
  else base = "/tmp";
  return base + "/veneer/profile.json";
}

std::optional<std::string> write_profile(const Profile& p, const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && !make_directories(path.substr(0, slash)))
    return "cannot create the directory of " + path + ": " + std::strerror(errno);
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return "cannot write " + temporary + ": " + std::strerror(errno);
    out << profile_text(p);
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      return "cannot write " + temporary;
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temporary.c_str());
    return "cannot rename " + temporary + " to " + path + ": " + why;
  }
  return std::nullopt;
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm t{};
  gmtime_r(&now, &t);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &t);
  return text;
}

}  // namespace veneer::topology
