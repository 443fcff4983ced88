// SPDX-License-Identifier: BSD-3-Clause
#include "interposer/report.h"

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "algorithms/measured.h"
#include "algorithms/select.h"
#include "algorithms/trial.h"
#include "datatypes/cache.h"
#include "interposer/footprint.h"
#include "interposer/requests.h"
#include "support/config.h"
#include "support/counters.h"
#include "support/staging.h"
#include "topology/hierarchy.h"

namespace veneer {

std::string collectives_report_text();  // defined by the collectives glue
std::string placement_report_text();    // interposer/topology_create.cpp

namespace {
constexpr int kCounters = static_cast<int>(Counter::count_);

void print_table(FILE* out, const char* who, const std::vector<unsigned long long>& v, int ranks) {
  std::fprintf(out, "veneer report (%s, %d rank%s, Veneer %s on %s)\n", who, ranks, ranks == 1 ? "" : "s",
               VENEER_VERSION, VENEER_MPI_FLAVOR);
  for (int i = 0; i < kCounters; ++i) {
    const auto c = static_cast<Counter>(i);
    if (c == Counter::nanoseconds) {
      std::fprintf(out, "  %-28s %14.6f\n", "seconds in veneer", static_cast<double>(v[static_cast<size_t>(i)]) * 1e-9);
    } else {
      std::fprintf(out, "  %-28s %14llu\n", counter_name(c), v[static_cast<size_t>(i)]);
    }
  }
}
}  // namespace

void print_report() {
  const Config& cfg = config();
  if (!cfg.report) return;
  int rank = 0, size = 1;
  if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS || PMPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS) {
    log(LogLevel::warn, "report: MPI_Comm_rank/size failed; this rank reports as rank 0 of 1");
    rank = 0;
    size = 1;
  }
  std::vector<unsigned long long> mine(kCounters), sum(kCounters);
  for (int i = 0; i < kCounters; ++i) mine[static_cast<size_t>(i)] = counters().get(static_cast<Counter>(i));
  // Every rank makes the same call whatever it returns; a failed sum falls back to this rank's own counts.
  if (PMPI_Reduce(mine.data(), sum.data(), kCounters, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD) !=
      MPI_SUCCESS) {
    log(LogLevel::warn, "report: MPI_Reduce of the counters failed; the totals are this rank's");
    sum = mine;
  }
  FILE* out = stderr;
  bool opened = false;
  if (!cfg.report_file.empty() && (rank == 0 || cfg.report == 2)) {
    std::string path = cfg.report_file;
    if (cfg.report == 2) path += "." + std::to_string(rank);
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      out = f;
      opened = true;
    }
  }
  if (cfg.report == 2) {
    std::string who = "rank " + std::to_string(rank);
    print_table(out, who.c_str(), mine, 1);
  } else if (rank == 0) {
    print_table(out, "summed over ranks", sum, size);
  }
  if (rank == 0 || cfg.report == 2) {
    const auto stats = datatypes::cache_stats();
    std::fprintf(out, "  %-28s %14lld (limit %lld)\n", "type cache entries", static_cast<long long>(stats.entries),
                 static_cast<long long>(cfg.type_cache_limit));
    std::fprintf(out, "  %-28s %14lld\n", "types decoded", static_cast<long long>(stats.decoded));
    std::fprintf(out, "  %-28s %14lld\n", "types passed through", static_cast<long long>(stats.unsupported));
    std::fprintf(out, "  %-28s %14lld\n", "requests in flight (max)", static_cast<long long>(requests::high_water()));
    const auto pool = staging_stats();
    std::fprintf(out, "  %-28s %14lld (limit %lld)\n", "staging bytes pooled",
                 static_cast<long long>(pool.pooled_bytes), static_cast<long long>(pool.limit));
    std::fprintf(out, "  %-28s %14lld (%lld allocated, %lld pushed out)\n", "staging buffers reused",
                 static_cast<long long>(pool.reused), static_cast<long long>(pool.allocated),
                 static_cast<long long>(pool.evicted));
    // What Veneer still holds at MPI_Finalize, before it lets go of it (rank 0's, or this rank's).
    const Footprint f = footprint();
    std::fprintf(out, "  %-28s %14lld (limit %lld each)\n", "pinned / device bytes pooled",
                 static_cast<long long>(f.pinned_bytes) + static_cast<long long>(f.device_bytes),
                 static_cast<long long>(f.pinned_limit));
    std::fprintf(out, "  %-28s %14lld\n", "device packers cached", static_cast<long long>(f.device_packers));
    std::fprintf(out, "  %-28s %14lld (%lld freed by the user)\n", "requests unfinished",
                 static_cast<long long>(f.requests_tracked), static_cast<long long>(f.requests_detached));
    std::fprintf(out, "  %-28s %14lld\n", "hierarchies alive", static_cast<long long>(f.hierarchies));
    // Which model decided: the machine profile (or why not), and where the chosen times came from.
    const std::string profile = algorithms::profile_info().describe();
    std::fprintf(out, "  %-28s %s\n", "model", profile.c_str());
    const std::string p2p = cfg.send_rules
                                ? std::string("per peer level (profile tables)")
                                : std::to_string(cfg.p2p_max_block) + " B (" +
                                      std::string(origin_name(cfg.p2p_max_block_origin, "VENEER_P2P_MAX_BLOCK")) + ")";
    std::fprintf(out, "  %-28s p2p %s, alltoallv/w %lld B (%s), pack %s (%s)\n", "take-over max block", p2p.c_str(),
                 static_cast<long long>(cfg.alltoall_max_block),
                 std::string(origin_name(cfg.alltoall_max_block_origin, "VENEER_ALLTOALL_MAX_BLOCK")).c_str(),
                 cfg.pack_max_block == std::numeric_limits<int64_t>::max()
                     ? "any block"
                     : (std::to_string(cfg.pack_max_block) + " B").c_str(),
                 std::string(origin_name(cfg.pack_max_block_origin, "VENEER_PACK_MAX_BLOCK")).c_str());
    const std::string sources = algorithms::decision_counts_text(algorithms::decision_counts());
    // Every rank decides alike, so rank 0's decisions speak for all.
    std::fprintf(out, "  %-28s %s\n", cfg.report == 2 ? "decisions by source" : "decisions by source, rank 0",
                 sources.c_str());
    // The model's collective choices tried on the job's own calls (algorithms/trial.h).
    const std::string trials = algorithms::trial_counts_text();
    if (!trials.empty())
      std::fprintf(out, "  %-28s %s\n", cfg.report == 2 ? "trials ended" : "trials ended, rank 0", trials.c_str());
    // Communicators Veneer made for its own algorithms (none while the library serves every collective).
    std::fprintf(out, "  %-28s %14lld\n", cfg.report == 2 ? "communicators made" : "communicators made, rank 0",
                 static_cast<long long>(topology::communicators_created()));
    const std::string coll = collectives_report_text();
    if (!coll.empty()) std::fprintf(out, "%s", coll.c_str());
    const std::string placement = placement_report_text();
    if (!placement.empty()) std::fprintf(out, "%s", placement.c_str());
  }
  if (opened) std::fclose(out);
  else std::fflush(out);
}

}  // namespace veneer
