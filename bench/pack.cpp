// SPDX-License-Identifier: BSD-3-Clause
// veneer-bench-pack: packing throughput of Veneer against the library under
// it, side by side in one run, on one rank.
//
// The binary is linked with libveneer, so MPI_Pack goes through Veneer while
// PMPI_Pack reaches the library directly. For every layout it times, in
// interleaved repetitions after a warm-up, (a) MPI_Pack, (b) PMPI_Pack,
// (c) memcpy of the same number of contiguous bytes (the bandwidth limit)
// and (d) a hand-written pack loop, and reports the medians. Before timing a
// layout it checks that Veneer's packed bytes equal the library's: numbers
// from a wrong packer are worthless, so a mismatch stops the run.

#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/layouts.h"

namespace {

using veneer::bench::Buffer;
using veneer::bench::PackCase;

const char* const kUsage =
    "usage: veneer-bench-pack [--quick] [--filter TEXT] [--repetitions R] [--seconds S]\n"
    "                         [--csv FILE] [--json FILE]\n"
    "  --quick          small layouts and short batches (a CI run of a few seconds)\n"
    "  --filter TEXT    only layouts whose name contains TEXT\n"
    "  --repetitions R  timed batches per method and layout; medians are reported (default 7)\n"
    "  --seconds S      length of one timed batch (default 0.01)\n"
    "  --csv FILE       write the table as CSV\n"
    "  --json FILE      append one JSON line per layout\n";

struct Options {
  bool quick = false;
  std::string filter;
  int repetitions = 7;
  double batch_seconds = 0.01;
  std::string csv_path, json_path;
};

std::pair<std::optional<Options>, std::string> parse_options(int argc, char** argv) {
  Options o;
  bool batch_given = false, repetitions_given = false;
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    if (flag == "--help" || flag == "-h") return {std::nullopt, ""};
    if (flag == "--quick") {
      o.quick = true;
      continue;
    }
    if (a + 1 >= argc) return {std::nullopt, "missing value after " + flag};
    const char* value = argv[++a];
    if (flag == "--filter") {
      o.filter = value;
    } else if (flag == "--csv") {
      o.csv_path = value;
    } else if (flag == "--json") {
      o.json_path = value;
    } else if (flag == "--repetitions" || flag == "--seconds") {
      char* end = nullptr;
      errno = 0;
      double v = std::strtod(value, &end);
      if (errno != 0 || end == value || *end != '\0' || !(v > 0))
        return {std::nullopt, "bad value '" + std::string(value) + "' for " + flag};
      if (flag == "--repetitions") {
        o.repetitions = std::max(1, static_cast<int>(v));
        repetitions_given = true;
      } else {
        o.batch_seconds = v;
        batch_given = true;
      }
    } else {
      return {std::nullopt, "unknown option " + flag};
    }
  }
  if (o.quick) {
    if (!batch_given) o.batch_seconds = 0.001;
    if (!repetitions_given) o.repetitions = 3;
  }
  return {o, ""};
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The shared object a symbol resolves to in this process: shows whether
// MPI_Pack really goes through Veneer.
std::string resolved_in(const char* symbol) {
  void* address = dlsym(RTLD_DEFAULT, symbol);
  Dl_info info{};
  if (address && dladdr(address, &info) && info.dli_fname) return info.dli_fname;
  return "(not found)";
}

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string v(text, static_cast<size_t>(length));
  v = v.substr(0, v.find('\n'));
  std::replace(v.begin(), v.end(), '\t', ' ');
  while (!v.empty() && (v.back() == ' ' || v.back() == '\0' || v.back() == '\r')) v.pop_back();
  return v;
}

std::string json_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

// Whether the library packs a struct of absolute addresses at MPI_BOTTOM
// (MPICH 4.0.2 refuses a null inbuf).
bool library_packs_at_bottom() {
  double value = 1.5, packed = 0;
  MPI_Aint address;
  MPI_Get_address(&value, &address);
  int one = 1;
  MPI_Datatype element = MPI_DOUBLE, t;
  MPI_Type_create_struct(1, &one, &address, &element, &t);
  MPI_Type_commit(&t);
  int position = 0;
  int rc = PMPI_Pack(MPI_BOTTOM, 1, t, &packed, sizeof packed, &position, MPI_COMM_WORLD);
  MPI_Type_free(&t);
  return rc == MPI_SUCCESS && position == sizeof packed && packed == value;
}

struct Result {
  std::string layout, family;
  int64_t bytes = 0;
  double block_bytes = 0;
  double veneer = 0, library = 0, memcpy = 0;  // GB/s, medians
  std::optional<double> hand;
};

std::string error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) return "error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(length));
}

// Checks the packed output of Veneer (and of the hand-written loop) against
// the library's. Returns an error message, empty when all agree.
std::string check(const PackCase& c, int64_t bytes) {
  const int size = static_cast<int>(bytes);
  Buffer by_veneer(bytes), by_library(bytes), by_hand(bytes);
  // Different fillings, so a byte nobody wrote cannot agree by chance.
  by_veneer.fill_bytes(0xA5);
  by_library.fill_bytes(0x5A);
  by_hand.fill_bytes(0x3C);
  int veneer_position = 0, library_position = 0;
  int rc = MPI_Pack(c.origin, c.count, c.type.get(), by_veneer.data(), size, &veneer_position, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return "MPI_Pack (Veneer) failed: " + error_text(rc);
  rc = PMPI_Pack(c.origin, c.count, c.type.get(), by_library.data(), size, &library_position, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return "PMPI_Pack (library) failed: " + error_text(rc);
  if (library_position != size)
    return "the library packed " + std::to_string(library_position) + " bytes, the type has " + std::to_string(size);
  if (veneer_position != library_position)
    return "Veneer's MPI_Pack advanced the position to " + std::to_string(veneer_position) + ", the library's to " +
           std::to_string(library_position);
  auto first_difference = [&](const Buffer& a) -> int64_t {
    for (int64_t i = 0; i < bytes; ++i)
      if (a.data()[i] != by_library.data()[i]) return i;
    return -1;
  };
  if (int64_t at = first_difference(by_veneer); at >= 0) {
    char text[160];
    std::snprintf(text, sizeof text,
                  "Veneer's MPI_Pack output differs from PMPI_Pack at byte %" PRId64 " of %" PRId64
                  " (Veneer 0x%02x, library 0x%02x)",
                  at, bytes, static_cast<unsigned>(by_veneer.data()[at]), static_cast<unsigned>(by_library.data()[at]));
    return text;
  }
  if (c.hand_pack) {
    c.hand_pack(by_hand.data());
    if (int64_t at = first_difference(by_hand); at >= 0)
      return "the hand-written loop differs from PMPI_Pack at byte " + std::to_string(at) + " (a benchmark bug)";
  }
  return "";
}

struct Method {
  Method(const char* n, std::function<void()> r) : name(n), run(std::move(r)) {}
  const char* name;
  std::function<void()> run;
  int64_t calls_per_batch = 1;
  std::vector<double> gbytes_per_s;
};

// Calls per batch so that one batch lasts about `seconds`.
int64_t calibrate(Method& m, double seconds) {
  int64_t calls = 1;
  for (;;) {
    double start = seconds_now();
    for (int64_t i = 0; i < calls; ++i) m.run();
    double elapsed = seconds_now() - start;
    if (elapsed >= seconds / 4 || calls >= (int64_t{1} << 24)) {
      double per_call = elapsed / static_cast<double>(calls);
      return std::clamp<int64_t>(static_cast<int64_t>(seconds / std::max(per_call, 1e-9)), 1, int64_t{1} << 24);
    }
    calls *= 2;
  }
}

std::optional<Result> measure(const PackCase& c, const Options& o, std::string& error) {
  int type_size = 0;
  MPI_Type_size(c.type.get(), &type_size);
  const int64_t bytes = static_cast<int64_t>(type_size) * c.count;
  if (bytes <= 0 || bytes > INT_MAX) {
    error = "packed size " + std::to_string(bytes) + " out of range for MPI_Pack";
    return std::nullopt;
  }
  error = check(c, bytes);
  if (!error.empty()) return std::nullopt;

  Buffer out(bytes), contiguous(bytes);
  contiguous.fill<unsigned char>(1);
  const int size = static_cast<int>(bytes);
  std::vector<Method> methods;
  methods.emplace_back("veneer", [&] {
    int position = 0;
    MPI_Pack(c.origin, c.count, c.type.get(), out.data(), size, &position, MPI_COMM_WORLD);
  });
  methods.emplace_back("library", [&] {
    int position = 0;
    PMPI_Pack(c.origin, c.count, c.type.get(), out.data(), size, &position, MPI_COMM_WORLD);
  });
  methods.emplace_back("memcpy", [&] { std::memcpy(out.data(), contiguous.data(), static_cast<size_t>(bytes)); });
  if (c.hand_pack) methods.emplace_back("hand", [&] { c.hand_pack(out.data()); });

  for (Method& m : methods) {
    for (int i = 0; i < 3; ++i) m.run();  // first touch, type caches
    m.calls_per_batch = calibrate(m, o.batch_seconds);
  }
  // Interleaved: every repetition times every method once, starting with a
  // different one each time, so slow drifts of the machine hit all alike.
  for (int r = 0; r < o.repetitions; ++r) {
    for (size_t k = 0; k < methods.size(); ++k) {
      Method& m = methods[(k + static_cast<size_t>(r)) % methods.size()];
      double start = seconds_now();
      for (int64_t i = 0; i < m.calls_per_batch; ++i) m.run();
      double elapsed = seconds_now() - start;
      m.gbytes_per_s.push_back(static_cast<double>(bytes) * static_cast<double>(m.calls_per_batch) / elapsed / 1e9);
    }
  }

  Result res;
  res.layout = c.name;
  res.family = c.family;
  res.bytes = bytes;
  res.block_bytes = c.block_bytes;
  res.veneer = median(methods[0].gbytes_per_s);
  res.library = median(methods[1].gbytes_per_s);
  res.memcpy = median(methods[2].gbytes_per_s);
  if (methods.size() > 3) res.hand = median(methods[3].gbytes_per_s);
  return res;
}

void print_row(const Result& r) {
  char hand[32] = "-";
  if (r.hand) std::snprintf(hand, sizeof hand, "%.3f", *r.hand);
  std::printf("%-22s %10" PRId64 " %9.1f %12.3f %12.3f %12.3f %12s %10.2f %10.2f\n", r.layout.c_str(), r.bytes,
              r.block_bytes, r.veneer, r.library, r.memcpy, hand, r.veneer / r.library, r.veneer / r.memcpy);
  std::fflush(stdout);
}

int run(const Options& o) {
  const std::string library = library_version();
  const std::string pack_in = resolved_in("MPI_Pack");
  std::printf("pack: %s\n", library.c_str());
  std::printf("pack: MPI_Pack resolves to %s, PMPI_Pack to %s\n", pack_in.c_str(), resolved_in("PMPI_Pack").c_str());
  if (pack_in.find("veneer") == std::string::npos)
    std::printf("pack: WARNING: MPI_Pack does not go through Veneer; the 'veneer' column is the library\n");

  FILE* csv = nullptr;
  if (!o.csv_path.empty()) {
    csv = std::fopen(o.csv_path.c_str(), "w");
    if (!csv) {
      std::fprintf(stderr, "pack: cannot open %s\n", o.csv_path.c_str());
      return 1;
    }
    std::fprintf(csv,
                 "layout,family,bytes,block_bytes,veneer_gbps,library_gbps,memcpy_gbps,hand_gbps,"
                 "veneer_over_library,veneer_over_memcpy\n");
  }
  FILE* json = nullptr;
  if (!o.json_path.empty()) {
    json = std::fopen(o.json_path.c_str(), "a");
    if (!json) {
      std::fprintf(stderr, "pack: cannot open %s\n", o.json_path.c_str());
      if (csv) std::fclose(csv);
      return 1;
    }
  }

  veneer::bench::Scale scale;
  scale.quick = o.quick;
  scale.absolute_addresses = library_packs_at_bottom();
  if (!scale.absolute_addresses)
    std::printf("pack: the library's MPI_Pack rejects MPI_BOTTOM; struct layouts use relative displacements\n");
  std::printf("%-22s %10s %9s %12s %12s %12s %12s %10s %10s\n", "layout", "bytes", "block B", "veneer GB/s",
              "library GB/s", "memcpy GB/s", "hand GB/s", "ven/lib", "ven/memcpy");

  int status = 0;
  int measured = 0;
  for (const auto& maker : veneer::bench::pack_cases(scale)) {
    if (!o.filter.empty() && maker.name.find(o.filter) == std::string::npos) continue;
    std::string error;
    std::optional<Result> r;
    {
      PackCase c = maker.make();
      r = measure(c, o, error);
    }
    if (!r) {
      std::fprintf(stderr, "pack: %s: %s\n", maker.name.c_str(), error.c_str());
      std::printf("pack: FAILED on %s: %s\n", maker.name.c_str(), error.c_str());
      status = 1;
      break;
    }
    ++measured;
    print_row(*r);
    std::string hand = r->hand ? std::to_string(*r->hand) : "";
    if (csv)
      std::fprintf(csv, "%s,%s,%" PRId64 ",%.3f,%.6g,%.6g,%.6g,%s,%.6g,%.6g\n", r->layout.c_str(), r->family.c_str(),
                   r->bytes, r->block_bytes, r->veneer, r->library, r->memcpy, hand.c_str(), r->veneer / r->library,
                   r->veneer / r->memcpy);
    if (json)
      std::fprintf(json,
                   "{\"bench\":\"pack\",\"library\":\"%s\",\"layout\":\"%s\",\"family\":\"%s\",\"bytes\":%" PRId64
                   ",\"block_bytes\":%.3f,\"veneer_gbps\":%.6g,\"library_gbps\":%.6g,\"memcpy_gbps\":%.6g,"
                   "\"hand_gbps\":%s,\"veneer_over_library\":%.6g,\"veneer_over_memcpy\":%.6g,\"quick\":%s}\n",
                   json_text(library).c_str(), r->layout.c_str(), r->family.c_str(), r->bytes, r->block_bytes,
                   r->veneer, r->library, r->memcpy, r->hand ? hand.c_str() : "null", r->veneer / r->library,
                   r->veneer / r->memcpy, o.quick ? "true" : "false");
  }
  if (csv) std::fclose(csv);
  if (json) std::fclose(json);
  if (status == 0) std::printf("pack: %d layouts checked against PMPI_Pack and measured\n", measured);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  // Errors come back as codes, so a failing pack is reported, not fatal.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  auto [options, error] = parse_options(argc, argv);
  int status = 0;
  if (!options) {
    if (!error.empty()) std::fprintf(stderr, "pack: %s\n", error.c_str());
    std::fputs(kUsage, error.empty() ? stdout : stderr);
    status = error.empty() ? 0 : 2;
  } else {
    // A single-process benchmark: further ranks, if launched, only wait.
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) status = run(*options);
  }
  MPI_Finalize();
  return status;
}
