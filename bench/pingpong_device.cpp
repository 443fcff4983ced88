// SPDX-License-Identifier: BSD-3-Clause
// veneer-bench-pingpong-device: round trips between ranks 0 and 1 of
// non-contiguous objects in device memory, the shapes of GPU codes' halos:
//
// - 2d: rows of B bytes, rows 2B apart (MPI_Type_vector of MPI_BYTE);
// - 3d: a B x n x m block of bytes inside a 2B x 2n x m array
//   (MPI_Type_create_subarray), planes of n rows of B bytes;
//
// for blocks B of 1 B to 1 KiB and objects of 1 KiB to 16 MiB, two ways:
//
// - mpi: MPI_Send / MPI_Recv of the device object with its datatype (what
//   Veneer carries; without Veneer only a CUDA-aware library can);
// - handpacked: what applications do today: one 2-D device copy per plane
//   (cudaMemcpy2DAsync) into pinned host memory, a contiguous send, and 2-D
//   copies back into the device object on the other side.
//
// Each point is checked once per way before it is timed: the object arriving
// at rank 1 and the one coming back to rank 0 must hold the sent bytes, and
// the gaps between blocks must be untouched. How Veneer moves device data
// (VENEER_DEVICE_METHOD, VENEER_DEVICE_ONESHOT_MAX) is read at MPI_Init: run
// once per setting (bench/gpu/run_on_gpu_machine.sh does) and compare the
// "speed-up" columns, each measured against the workaround in the same run.
#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/device_memory.h"

namespace {

using veneer::bench::DeviceBuffer;
using veneer::kernels::DeviceRuntime;
using veneer::kernels::DeviceStream;

const char* const kUsage =
    "usage: veneer-bench-pingpong-device [--quick] [--shape 2d|3d|all] [--min BYTES] [--max BYTES]\n"
    "                                    [--min-block B] [--max-block B] [--repetitions R] [--seconds S]\n"
    "                                    [--cuda-aware auto|yes|no] [--csv FILE]\n"
    "  run on 2 ranks (further ranks wait). Objects of 1 KiB to 16 MiB (x4 steps),\n"
    "  blocks of 1 B to 1 KiB (x4 steps) by default; --quick: 1 KiB and 64 KiB, blocks 1, 32, 1024.\n";

struct Options {
  std::vector<std::string> shapes{"2d", "3d"};
  int64_t min_bytes = 1024, max_bytes = 16 << 20;
  int64_t min_block = 1, max_block = 1024;
  int64_t step = 4, block_step = 4;  // factors between sizes, between blocks
  int repetitions = 5;
  double batch_seconds = 0.02;
  int cuda_aware = -1;
  std::string csv_path;
};

std::optional<int64_t> parse_size(const char* text) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || v <= 0) return std::nullopt;
  std::string_view unit(end);
  if (unit == "k" || unit == "K") v <<= 10;
  else if (unit == "m" || unit == "M") v <<= 20;
  else if (!unit.empty()) return std::nullopt;
  return v;
}

std::pair<std::optional<Options>, std::string> parse_options(int argc, char** argv) {
  Options o;
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    if (flag == "--help" || flag == "-h") return {std::nullopt, ""};
    if (flag == "--quick") {
      o.max_bytes = 64 << 10;
      o.step = 64;
      o.block_step = 32;
      o.max_block = 1024;
      o.repetitions = 3;
      o.batch_seconds = 0.002;
      continue;
    }
    if (a + 1 >= argc) return {std::nullopt, "missing value after " + flag};
    const char* value = argv[++a];
    const std::string bad = "bad value '" + std::string(value) + "' for " + flag;
    if (flag == "--shape") {
      std::string_view v = value;
      if (v == "all") o.shapes = {"2d", "3d"};
      else if (v == "2d" || v == "3d") o.shapes = {std::string(v)};
      else return {std::nullopt, bad};
    } else if (flag == "--cuda-aware") {
      std::string_view v = value;
      if (v != "auto" && v != "yes" && v != "no") return {std::nullopt, bad};
      o.cuda_aware = v == "auto" ? -1 : (v == "yes" ? 1 : 0);
    } else if (flag == "--csv") {
      o.csv_path = value;
    } else if (flag == "--seconds") {
      char* end = nullptr;
      o.batch_seconds = std::strtod(value, &end);
      if (end == value || *end != '\0' || !(o.batch_seconds > 0)) return {std::nullopt, bad};
    } else if (auto v = parse_size(value)) {
      if (flag == "--min") o.min_bytes = *v;
      else if (flag == "--max") o.max_bytes = *v;
      else if (flag == "--min-block") o.min_block = *v;
      else if (flag == "--max-block") o.max_block = *v;
      else if (flag == "--repetitions") o.repetitions = static_cast<int>(std::min<int64_t>(*v, 1000));
      else return {std::nullopt, "unknown option " + flag};
    } else {
      return {std::nullopt, bad};
    }
  }
  if (o.max_bytes < o.min_bytes || o.max_bytes > (int64_t{1} << 30) || o.max_block < o.min_block)
    return {std::nullopt, "sizes must satisfy min <= max <= 1 GiB and min-block <= max-block"};
  return {o, ""};
}

// One object: `planes` planes of `rows` rows of `block` bytes; rows 2 x block
// apart, planes 2 x rows rows apart (3d) or rows back to back (2d: planes = 1).
struct Shape {
  std::string name;
  int64_t block = 0, rows = 0, planes = 0;
  int64_t pitch() const { return 2 * block; }
  int64_t plane_pitch() const { return name == "3d" ? 2 * rows * pitch() : rows * pitch(); }
  int64_t bytes() const { return block * rows * planes; }
  int64_t footprint() const { return planes * plane_pitch(); }
  bool contains(int64_t offset) const {  // whether byte `offset` of the footprint is the object's
    const int64_t in_plane = offset % plane_pitch();
    return in_plane / pitch() < rows && in_plane % pitch() < block;
  }
};

Shape make_shape(const std::string& name, int64_t block, int64_t bytes) {
  Shape s{name, block, bytes / block, 1};
  if (name == "3d") {
    // As square as powers of two allow: rows >= planes.
    int64_t planes = 1;
    while (planes * planes * 2 <= s.rows) planes *= 2;
    s.planes = planes;
    s.rows /= planes;
  }
  return s;
}

MPI_Datatype make_type(const Shape& s) {
  MPI_Datatype t;
  if (s.name == "2d") {
    MPI_Type_vector(static_cast<int>(s.rows), static_cast<int>(s.block), static_cast<int>(s.pitch()), MPI_BYTE, &t);
  } else {
    const int sizes[] = {static_cast<int>(s.planes), static_cast<int>(2 * s.rows), static_cast<int>(s.pitch())};
    const int sub[] = {static_cast<int>(s.planes), static_cast<int>(s.rows), static_cast<int>(s.block)};
    const int starts[] = {0, 0, 0};
    MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_BYTE, &t);
  }
  MPI_Type_commit(&t);
  return t;
}

unsigned char pattern_byte(int64_t i, int salt) { return static_cast<unsigned char>((i * 131 + salt * 17 + 7) % 251); }
constexpr unsigned char kPoison = 0xEE;

// Everything one rank needs for one point.
class Point {
 public:
  Point(DeviceRuntime& rt, const Shape& s)
      : rt_(rt),
        shape_(s),
        type_(make_type(s)),
        object_(rt, DeviceBuffer::Kind::device, static_cast<size_t>(s.footprint())),
        packed_(rt, DeviceBuffer::Kind::pinned, static_cast<size_t>(s.bytes())),
        host_(static_cast<size_t>(s.footprint())) {}
  ~Point() { MPI_Type_free(&type_); }
  Point(const Point&) = delete;
  Point& operator=(const Point&) = delete;
  bool ok() const { return object_.get() && packed_.get(); }

  // The object's bytes set to the pattern (salt >= 0) or all poison (salt < 0).
  bool fill(int salt) {
    for (int64_t i = 0; i < shape_.footprint(); ++i)
      host_[static_cast<size_t>(i)] = salt >= 0 && shape_.contains(i) ? pattern_byte(i, salt) : kPoison;
    return veneer::bench::upload(rt_, object_.get(), host_.data(), host_.size());
  }
  // First footprint byte that differs from the pattern of `salt` (gaps:
  // poison), or -1; -2 if it could not be read.
  int64_t first_wrong(int salt) {
    if (!veneer::bench::download(rt_, host_.data(), object_.get(), host_.size())) return -2;
    for (int64_t i = 0; i < shape_.footprint(); ++i) {
      const unsigned char want = shape_.contains(i) ? pattern_byte(i, salt) : kPoison;
      if (host_[static_cast<size_t>(i)] != want) return i;
    }
    return -1;
  }

  void send(bool handpacked, int peer) {
    if (!handpacked) {
      MPI_Send(object_.get(), 1, type_, peer, 0, MPI_COMM_WORLD);
      return;
    }
    copy_planes(true);
    MPI_Send(packed_.get(), static_cast<int>(shape_.bytes()), MPI_BYTE, peer, 0, MPI_COMM_WORLD);
  }
  void receive(bool handpacked, int peer) {
    if (!handpacked) {
      MPI_Recv(object_.get(), 1, type_, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      return;
    }
    MPI_Recv(packed_.get(), static_cast<int>(shape_.bytes()), MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    copy_planes(false);
  }

 private:
  // One cudaMemcpy2DAsync-like copy per plane, then wait for them.
  void copy_planes(bool to_packed) {
    DeviceStream stream = rt_.stream(1);
    bool ok = stream != nullptr;
    const auto width = static_cast<size_t>(shape_.block), rows = static_cast<size_t>(shape_.rows);
    const auto pitch = static_cast<size_t>(shape_.pitch());
    for (int64_t z = 0; ok && z < shape_.planes; ++z) {
      char* plane = object_.get() + z * shape_.plane_pitch();
      char* slab = packed_.get() + z * shape_.rows * shape_.block;
      ok = to_packed ? rt_.copy_2d(slab, width, plane, pitch, width, rows, stream)
                     : rt_.copy_2d(plane, pitch, slab, width, width, rows, stream);
    }
    ok = rt_.synchronize(stream) && ok;
    if (!ok) {
      std::fprintf(stderr, "pingpong-device: a 2-D device copy failed\n");
      MPI_Abort(MPI_COMM_WORLD, 4);
    }
  }

  DeviceRuntime& rt_;
  Shape shape_;
  MPI_Datatype type_;
  DeviceBuffer object_;  // device memory
  DeviceBuffer packed_;  // pinned host memory, for the hand-packed way
  std::vector<unsigned char> host_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

bool veneer_preloaded() { return veneer::bench::veneer_loaded(); }

std::string veneer_method() {
  if (!veneer_preloaded()) return "library";
  const char* m = std::getenv("VENEER_DEVICE_METHOD");
  std::string name = m && *m ? m : "auto";
  if (const char* x = std::getenv("VENEER_DEVICE_ONESHOT_MAX")) name += ",oneshot_max=" + std::string(x);
  return name;
}

// One checked round trip: rank 0's pattern arrives at rank 1 and comes back.
// Returns an empty string or what went wrong.
// Ranks beyond the first two only keep step with the barriers.
std::string check_round_trip(Point& p, bool handpacked, int rank, int salt) {
  if (!p.fill(rank == 0 ? salt : -1)) return "device upload failed";
  MPI_Barrier(MPI_COMM_WORLD);
  int64_t wrong = -1;
  if (rank >= 2) {
    return "";
  } else if (rank == 0) {
    p.send(handpacked, 1);
    if (!p.fill(-1)) return "device upload failed";
    p.receive(handpacked, 1);
    wrong = p.first_wrong(salt);
  } else {
    p.receive(handpacked, 0);
    wrong = p.first_wrong(salt);
    p.send(handpacked, 0);
  }
  if (wrong == -1) return "";
  char text[160];
  std::snprintf(text, sizeof text, "rank %d: byte %" PRId64 " of the footprint is wrong after the %s", rank, wrong,
                rank == 0 ? "round trip" : "first leg");
  return text;
}

// Median half round trip over `repetitions` batches; the batch length is
// fixed by rank 0 so both ranks run the same number of round trips.
double time_round_trips(Point& p, bool handpacked, int rank, const Options& o) {
  auto batch = [&](int64_t n) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int64_t i = 0; i < n; ++i) {
      if (rank == 0) {
        p.send(handpacked, 1);
        p.receive(handpacked, 1);
      } else if (rank == 1) {
        p.receive(handpacked, 0);
        p.send(handpacked, 0);
      }
    }
    return MPI_Wtime() - start;
  };
  double once = batch(1);
  MPI_Bcast(&once, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  const int64_t n = std::clamp<int64_t>(static_cast<int64_t>(o.batch_seconds / std::max(once, 1e-9)), 1, 10000);
  // A round trip that takes longer than a second (a hand-packed object of
  // 1-byte blocks) is timed once more, not `repetitions` times.
  const int repetitions = once > 1.0 ? 1 : o.repetitions;
  std::vector<double> halves;
  for (int r = 0; r < repetitions; ++r) halves.push_back(batch(n) / static_cast<double>(n) / 2);
  double m = median(halves);
  MPI_Bcast(&m, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return m;
}

int run(const Options& o, const veneer::bench::DeviceChoice& device) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (rank == 0) std::fprintf(stderr, "pingpong-device: needs 2 ranks\n");
    return 2;
  }
  if (!device.rt) {
    if (rank == 0) std::fprintf(stderr, "pingpong-device: no device: %s\n", device.name.c_str());
    return 2;
  }
  if (device.emulated && veneer_preloaded() && !device.installed_into_veneer) {
    if (rank == 0)
      std::fprintf(stderr, "pingpong-device: Veneer is preloaded but the emulator could not be handed to it\n");
    return 2;
  }
  const bool cuda_aware = o.cuda_aware >= 0 ? o.cuda_aware == 1 : veneer::bench::library_says_cuda_aware();
  const bool mpi_can = cuda_aware || veneer_preloaded();
  const std::string method = veneer_method();
  int status = 0;
  FILE* csv = nullptr;
  if (rank == 0) {
    std::printf("pingpong-device: device %s; Veneer preloaded: %s (device method %s); the library %s CUDA-aware\n",
                device.name.c_str(), veneer_preloaded() ? "yes" : "no", method.c_str(), cuda_aware ? "is" : "is not");
    if (!mpi_can)
      std::printf(
          "pingpong-device: the library cannot read device memory and Veneer is not preloaded: only the "
          "hand-packed workaround runs\n");
    std::printf("%-5s %8s %10s %14s %14s %10s\n", "shape", "block", "bytes", "mpi us", "handpacked us", "speed-up");
    if (!o.csv_path.empty()) {
      csv = std::fopen(o.csv_path.c_str(), "w");
      if (!csv) std::fprintf(stderr, "pingpong-device: cannot write %s\n", o.csv_path.c_str());
      else std::fprintf(csv, "shape,block,bytes,method,mpi_seconds,handpacked_seconds,speedup\n");
    }
  }
  int salt = 1;
  int64_t points = 0;
  for (const std::string& shape_name : o.shapes) {
    for (int64_t block = o.min_block; block <= o.max_block && status == 0; block *= o.block_step) {
      for (int64_t bytes = std::max(o.min_bytes, block); bytes <= o.max_bytes && status == 0; bytes *= o.step) {
        const Shape shape = make_shape(shape_name, block, bytes);
        Point p(*device.rt, shape);
        int ready = p.ok() ? 1 : 0, all_ready = 0;
        MPI_Allreduce(&ready, &all_ready, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all_ready) {
          if (rank == 0)
            std::fprintf(stderr, "pingpong-device: cannot allocate %" PRId64 " bytes\n", shape.footprint());
          status = 2;
          break;
        }
        double seconds[2] = {0, 0};  // mpi, handpacked
        for (int way = mpi_can ? 0 : 1; way < 2; ++way) {
          const bool handpacked = way == 1;
          const std::string error = check_round_trip(p, handpacked, rank, salt++);
          int bad = error.empty() ? 0 : 1, any_bad = 0;
          MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
          if (bad)
            std::fprintf(stderr, "pingpong-device: MISMATCH %s block %" PRId64 " bytes %" PRId64 " (%s): %s\n",
                         shape_name.c_str(), block, bytes, handpacked ? "handpacked" : "mpi", error.c_str());
          if (any_bad) {
            status = 1;
            break;
          }
          seconds[way] = time_round_trips(p, handpacked, rank, o);
        }
        if (status) break;
        ++points;
        if (rank == 0) {
          char mpi_us[32] = "n/a", ratio[32] = "n/a";
          if (mpi_can) {
            std::snprintf(mpi_us, sizeof mpi_us, "%.2f", seconds[0] * 1e6);
            std::snprintf(ratio, sizeof ratio, "%.2fx", seconds[1] / seconds[0]);
          }
          std::printf("%-5s %8" PRId64 " %10" PRId64 " %14s %14.2f %10s\n", shape_name.c_str(), block, bytes, mpi_us,
                      seconds[1] * 1e6, ratio);
          std::fflush(stdout);
          if (csv)
            std::fprintf(csv, "%s,%" PRId64 ",%" PRId64 ",%s,%.9g,%.9g,%.6g\n", shape_name.c_str(), block, bytes,
                         method.c_str(), mpi_can ? seconds[0] : 0.0, seconds[1],
                         mpi_can ? seconds[1] / seconds[0] : 0.0);
        }
      }
    }
  }
  if (csv) std::fclose(csv);
  int64_t failed = veneer::bench::device_failed_steps(), any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && !veneer::bench::device_counters().empty())
    std::printf("pingpong-device: device (rank 0): %s\n", veneer::bench::device_counters().c_str());
  if (any_failed && status == 0) status = 1;
  if (rank == 0)
    std::printf(status == 0 ? "pingpong-device: verified %" PRId64 " points, %s\n"
                            : "pingpong-device: FAILED after %" PRId64 " points, %s\n",
                points, mpi_can ? "both ways" : "hand-packed only");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  auto [options, error] = parse_options(argc, argv);
  veneer::bench::DeviceChoice device;
  if (options) device = veneer::bench::open_device(options->cuda_aware == 1);
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int status = 2;
  if (!options) {
    if (rank == 0) {
      if (!error.empty()) std::fprintf(stderr, "pingpong-device: %s\n", error.c_str());
      std::fputs(kUsage, error.empty() ? stdout : stderr);
    }
    status = error.empty() ? 0 : 2;
  } else {
    status = run(*options, device);
  }
  MPI_Finalize();
  return status;
}
