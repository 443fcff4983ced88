// SPDX-License-Identifier: BSD-3-Clause
// veneer-bench-pingpong: round trips between ranks 0 and 1 of contiguous
// bytes and of strided vectors of doubles (blocks of 1, 8 and 64 doubles at
// twice the block's stride), 1 KiB to 4 MiB of payload.
//
// A plain MPI program: run it as is for the library's numbers and under
// LD_PRELOAD=libveneer.so for Veneer's. Every size is checked once (the data
// arriving at rank 1 and coming back to rank 0) before it is timed.

#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

const char* const kUsage =
    "usage: veneer-bench-pingpong [--quick] [--min BYTES] [--max BYTES] [--repetitions R]\n"
    "                             [--seconds S] [--json FILE] [--csv FILE]\n"
    "  run on 2 ranks (further ranks wait). Sizes are payload bytes, powers of two.\n";

struct Options {
  int64_t min_bytes = 1024;
  int64_t max_bytes = 4 << 20;
  int repetitions = 5;          // timed batches per size; the median is reported
  double batch_seconds = 0.02;  // aim of one batch
  std::string json_path, csv_path;
};

std::optional<double> parse_number(const char* text) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v > 0)) return std::nullopt;
  return v;
}

std::pair<std::optional<Options>, std::string> parse_options(int argc, char** argv) {
  Options o;
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    if (flag == "--help" || flag == "-h") return {std::nullopt, ""};
    if (flag == "--quick") {
      o.max_bytes = 256 << 10;
      o.repetitions = 3;
      o.batch_seconds = 0.002;
      continue;
    }
    if (a + 1 >= argc) return {std::nullopt, "missing value after " + flag};
    const char* value = argv[++a];
    if (flag == "--json") {
      o.json_path = value;
    } else if (flag == "--csv") {
      o.csv_path = value;
    } else if (auto v = parse_number(value)) {
      if (flag == "--min") {
        o.min_bytes = static_cast<int64_t>(*v);
      } else if (flag == "--max") {
        o.max_bytes = static_cast<int64_t>(*v);
      } else if (flag == "--repetitions") {
        o.repetitions = std::max(1, static_cast<int>(*v));
      } else if (flag == "--seconds") {
        o.batch_seconds = *v;
      } else {
        return {std::nullopt, "unknown option " + flag};
      }
    } else {
      return {std::nullopt, "bad value '" + std::string(value) + "' for " + flag};
    }
  }
  if (o.min_bytes < 8 || o.max_bytes < o.min_bytes || o.max_bytes > (int64_t{1} << 30))
    return {std::nullopt, "sizes must satisfy 8 <= min <= max <= 1 GiB"};
  return {o, ""};
}

class Datatype {
 public:
  explicit Datatype(MPI_Datatype type) : type_(type) {}
  Datatype(const Datatype&) = delete;
  Datatype& operator=(const Datatype&) = delete;
  ~Datatype() {
    if (type_ != MPI_DATATYPE_NULL && type_ != MPI_BYTE) MPI_Type_free(&type_);
  }
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_;
};

// One message shape: `block_doubles` == 0 means contiguous bytes, otherwise a
// vector of blocks of that many doubles at a stride of twice the block.
struct Shape {
  const char* name;
  int64_t block_doubles;
};

constexpr Shape kShapes[] = {{"bytes", 0}, {"vector-b1", 1}, {"vector-b8", 8}, {"vector-b64", 64}};

struct Message {
  MPI_Datatype type;
  int count;
  int64_t span_bytes;     // bytes the buffer covers
  int64_t block_bytes;    // bytes of one contiguous block
  int64_t payload_bytes;  // bytes of data the message carries
};

Message describe(const Shape& s, int64_t payload, std::optional<Datatype>& owned) {
  if (s.block_doubles == 0) return {MPI_BYTE, static_cast<int>(payload), payload, payload, payload};
  int64_t block_bytes = s.block_doubles * 8;
  int64_t blocks = std::max<int64_t>(1, payload / block_bytes);
  MPI_Datatype t;
  MPI_Type_vector(static_cast<int>(blocks), static_cast<int>(s.block_doubles), static_cast<int>(2 * s.block_doubles),
                  MPI_DOUBLE, &t);
  MPI_Type_commit(&t);
  owned.emplace(t);
  return {t, 1, (2 * blocks - 1) * block_bytes, block_bytes, blocks * block_bytes};
}

// The payload bytes of the message: the blocks of the vector, or all bytes.
template <class Visit>
void for_each_block(const Message& m, const Shape& s, Visit visit) {
  if (s.block_doubles == 0) {
    visit(int64_t{0}, m.span_bytes);
    return;
  }
  for (int64_t at = 0; at < m.span_bytes; at += 2 * m.block_bytes) visit(at, m.block_bytes);
}

unsigned char pattern(int64_t offset, int round) {
  return static_cast<unsigned char>((offset * 131 + round * 7 + 1) % 251);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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

const char* preload() {
  const char* p = std::getenv("LD_PRELOAD");
  return p ? p : "";
}

std::string json_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

struct Row {
  std::string layout;
  int64_t bytes, block_bytes, iterations;
  double latency_us, gbytes_per_s;
};

int run(const Options& o) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (rank == 0) std::fprintf(stderr, "pingpong: needs 2 ranks\n");
    return 2;
  }
  // Ranks beyond the pair only take part in the collectives.
  const bool active = rank < 2;
  const int peer = 1 - rank;
  const bool veneer = std::strstr(preload(), "veneer") != nullptr;
  if (rank == 0) {
    std::printf("pingpong: %s; Veneer preloaded: %s\n", library_version().c_str(), veneer ? "yes" : "no");
    std::printf("%-12s %10s %8s %10s %14s %12s\n", "layout", "bytes", "block", "iterations", "latency us", "GB/s");
  }

  std::vector<Row> rows;
  std::vector<unsigned char> buffer, expected;
  for (const Shape& shape : kShapes) {
    for (int64_t payload = o.min_bytes; payload <= o.max_bytes; payload *= 2) {
      std::optional<Datatype> owned;
      Message m = describe(shape, payload, owned);
      buffer.assign(static_cast<size_t>(m.span_bytes), 0);
      int failed = 0;

      // Check once: rank 0 sends the pattern, rank 1 checks it and returns
      // it; gaps must stay untouched on both sides.
      if (active) {
        if (rank == 0)
          for_each_block(m, shape, [&](int64_t at, int64_t n) {
            for (int64_t b = at; b < at + n; ++b) buffer[b] = pattern(b, 0);
          });
        expected = buffer;
        if (rank == 1)
          for_each_block(m, shape, [&](int64_t at, int64_t n) {
            for (int64_t b = at; b < at + n; ++b) expected[b] = pattern(b, 0);
          });
        if (rank == 0) {
          MPI_Send(buffer.data(), m.count, m.type, peer, 0, MPI_COMM_WORLD);
          std::fill(buffer.begin(), buffer.end(), 0);
          MPI_Recv(buffer.data(), m.count, m.type, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(buffer.data(), m.count, m.type, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          failed = buffer != expected;
          MPI_Send(buffer.data(), m.count, m.type, peer, 1, MPI_COMM_WORLD);
        }
        if (rank == 0) failed = buffer != expected;
        if (failed) {
          int64_t at = std::mismatch(buffer.begin(), buffer.end(), expected.begin()).first - buffer.begin();
          std::fprintf(stderr, "pingpong: rank %d: WRONG DATA for %s, %" PRId64 " bytes, at byte %" PRId64 "\n", rank,
                       shape.name, payload, at);
        }
      }
      int any_failed = 0;
      MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      if (any_failed) return 1;

      // Rank 0 picks the iteration count from a few warm-up round trips.
      auto round_trips = [&](int64_t n) {
        double start = MPI_Wtime();
        for (int64_t i = 0; i < n; ++i) {
          if (rank == 0) {
            MPI_Send(buffer.data(), m.count, m.type, peer, 2, MPI_COMM_WORLD);
            MPI_Recv(buffer.data(), m.count, m.type, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          } else if (rank == 1) {
            MPI_Recv(buffer.data(), m.count, m.type, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buffer.data(), m.count, m.type, peer, 2, MPI_COMM_WORLD);
          }
        }
        return MPI_Wtime() - start;
      };
      int64_t iterations = 0;
      if (active) {
        round_trips(2);  // first use of the type and the buffers
        const int64_t probe = 4;
        double t = round_trips(probe) / probe;
        iterations = std::clamp<int64_t>(static_cast<int64_t>(o.batch_seconds / std::max(t, 1e-7)), 3, 100000);
      }
      MPI_Bcast(&iterations, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
      std::vector<double> half_round_trip;
      for (int r = 0; r < o.repetitions; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (active) half_round_trip.push_back(round_trips(iterations) / static_cast<double>(iterations) / 2);
      }
      if (rank == 0) {
        double latency = median(half_round_trip);
        const double bytes = static_cast<double>(m.payload_bytes);
        Row row{shape.name, m.payload_bytes, m.block_bytes, iterations, latency * 1e6, bytes / latency / 1e9};
        std::printf("%-12s %10" PRId64 " %8" PRId64 " %10" PRId64 " %14.2f %12.3f\n", row.layout.c_str(), row.bytes,
                    row.block_bytes, row.iterations, row.latency_us, row.gbytes_per_s);
        std::fflush(stdout);
        rows.push_back(row);
      }
    }
  }

  if (rank == 0) {
    const std::string library = library_version();
    if (!o.json_path.empty()) {
      FILE* f = std::fopen(o.json_path.c_str(), "a");
      if (!f) {
        std::fprintf(stderr, "pingpong: cannot open %s\n", o.json_path.c_str());
        return 1;
      }
      for (const Row& r : rows)
        std::fprintf(f,
                     "{\"bench\":\"pingpong\",\"library\":\"%s\",\"preload\":\"%s\",\"veneer\":%s,\"layout\":\"%s\","
                     "\"bytes\":%" PRId64 ",\"block_bytes\":%" PRId64 ",\"iterations\":%" PRId64
                     ",\"latency_us\":%.6g,\"gbytes_per_s\":%.6g}\n",
                     json_text(library).c_str(), json_text(preload()).c_str(), veneer ? "true" : "false",
                     r.layout.c_str(), r.bytes, r.block_bytes, r.iterations, r.latency_us, r.gbytes_per_s);
      std::fclose(f);
    }
    if (!o.csv_path.empty()) {
      FILE* f = std::fopen(o.csv_path.c_str(), "w");
      if (!f) {
        std::fprintf(stderr, "pingpong: cannot open %s\n", o.csv_path.c_str());
        return 1;
      }
      std::fprintf(f, "layout,bytes,block_bytes,iterations,latency_us,gbytes_per_s,veneer\n");
      for (const Row& r : rows)
        std::fprintf(f, "%s,%" PRId64 ",%" PRId64 ",%" PRId64 ",%.6g,%.6g,%d\n", r.layout.c_str(), r.bytes,
                     r.block_bytes, r.iterations, r.latency_us, r.gbytes_per_s, veneer ? 1 : 0);
      std::fclose(f);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto [options, error] = parse_options(argc, argv);
  int status = 0;
  if (!options) {
    if (rank == 0) {
      if (!error.empty()) std::fprintf(stderr, "pingpong: %s\n", error.c_str());
      std::fputs(kUsage, error.empty() ? stdout : stderr);
    }
    status = error.empty() ? 0 : 2;
  } else {
    status = run(*options);
  }
  MPI_Finalize();
  return status;
}
