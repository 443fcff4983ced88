// The entry points: decide whether a call is taken (only from arguments
// identical on all ranks), pick the algorithm, convert bytes where needed,
// run, and count.
#include "algorithms/collectives.h"

#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "algorithms/buffers.h"
#include "algorithms/decisions.h"
#include "algorithms/measured.h"
#include "algorithms/primitives.h"
#include "algorithms/select.h"
#include "algorithms/tuning.h"
#include "support/config.h"
#include "support/log.h"
#include "topology/hierarchy.h"

namespace veneer::algorithms {

std::optional<Reduction> reduction_of(const Args& a) {
  auto t = TypeInfo::of(a.type);
  if (!t) return std::nullopt;
  Reduction r;
  r.type = *t;
  r.op = a.op;
  int commutative = 1;
  if (PMPI_Op_commutative(a.op, &commutative) != MPI_SUCCESS) return std::nullopt;
  r.commutative = commutative != 0;
  return r;
}

namespace {

// ---- Which (op, type) pairs MPI defines for the predefined ops --------------

enum class TypeClass { none, integer, floating, logical, complex, byte, pair };

TypeClass type_class(MPI_Datatype t) {
  const MPI_Datatype integers[] = {MPI_INT,         MPI_LONG,          MPI_SHORT,     MPI_UNSIGNED_SHORT,
                                   MPI_UNSIGNED,    MPI_UNSIGNED_LONG, MPI_LONG_LONG, MPI_UNSIGNED_LONG_LONG,
                                   MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_INT8_T,    MPI_INT16_T,
                                   MPI_INT32_T,     MPI_INT64_T,       MPI_UINT8_T,   MPI_UINT16_T,
                                   MPI_UINT32_T,    MPI_UINT64_T,      MPI_AINT,      MPI_OFFSET,
                                   MPI_COUNT};
  for (MPI_Datatype x : integers)
    if (t == x) return TypeClass::integer;
  if (t == MPI_FLOAT || t == MPI_DOUBLE || t == MPI_LONG_DOUBLE) return TypeClass::floating;
  if (t == MPI_C_BOOL) return TypeClass::logical;
  if (t == MPI_C_FLOAT_COMPLEX || t == MPI_C_DOUBLE_COMPLEX || t == MPI_C_LONG_DOUBLE_COMPLEX)
    return TypeClass::complex;
  if (t == MPI_BYTE) return TypeClass::byte;
  if (t == MPI_FLOAT_INT || t == MPI_DOUBLE_INT || t == MPI_LONG_INT || t == MPI_2INT || t == MPI_SHORT_INT ||
      t == MPI_LONG_DOUBLE_INT)
    return TypeClass::pair;
  // Fortran's named types (reductions combine with PMPI_Reduce_local, which knows them).
  if (t == MPI_DATATYPE_NULL) return TypeClass::none;  // an optional type the library lacks is null
  if (t == MPI_INTEGER || t == MPI_INTEGER1 || t == MPI_INTEGER2 || t == MPI_INTEGER4 || t == MPI_INTEGER8)
    return TypeClass::integer;
  if (t == MPI_REAL || t == MPI_DOUBLE_PRECISION || t == MPI_REAL4 || t == MPI_REAL8) return TypeClass::floating;
  if (t == MPI_LOGICAL) return TypeClass::logical;
  if (t == MPI_COMPLEX || t == MPI_DOUBLE_COMPLEX) return TypeClass::complex;
  if (t == MPI_2INTEGER || t == MPI_2REAL || t == MPI_2DOUBLE_PRECISION) return TypeClass::pair;
  return TypeClass::none;  // MPI_CHAR, MPI_CHARACTER, ...: left to the library
}

// nullopt: not a predefined op; else whether it is defined on types of class k.
std::optional<bool> predefined_op_accepts(MPI_Op op, TypeClass k) {
  using K = TypeClass;
  if (op == MPI_MAX || op == MPI_MIN) return k == K::integer || k == K::floating;
  if (op == MPI_SUM || op == MPI_PROD) return k == K::integer || k == K::floating || k == K::complex;
  if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR) return k == K::integer || k == K::logical;
  if (op == MPI_BAND || op == MPI_BOR || op == MPI_BXOR) return k == K::integer || k == K::byte;
  if (op == MPI_MAXLOC || op == MPI_MINLOC) return k == K::pair;
  if (op == MPI_REPLACE || op == MPI_NO_OP) return false;
  return std::nullopt;
}

bool is_reduction(Collective c) {
  return c == Collective::allreduce || c == Collective::reduce || c == Collective::reduce_scatter ||
         c == Collective::reduce_scatter_block;
}

// What the selector needs to know of a call, from arguments identical on all ranks.
struct Prepared {
  int64_t bytes = 0;
  int64_t count = 0;
  bool commutative = true;
  bool predefined_op = true;
  bool predefined_type = true;
  bool in_place = false;
};

std::optional<Prepared> prepare(const Call& c, int p, std::string* why) {
  auto refuse = [&](const char* reason) -> std::optional<Prepared> {
    if (why) *why = reason;
    return std::nullopt;
  };
  Prepared out;
  if (is_reduction(c.collective)) {
    auto t = TypeInfo::of(c.type);
    if (!t) return refuse("type without size or extent");
    int64_t total = 0;
    switch (c.collective) {
      case Collective::reduce_scatter:
        if (!c.rcounts) return refuse("no receive counts");
        for (int i = 0; i < p; ++i) {
          if (c.rcounts[i] < 0) return refuse("negative count");
          total += c.rcounts[i];
        }
        break;
      case Collective::reduce_scatter_block: total = static_cast<int64_t>(c.count) * p; break;
      default: total = c.count;
    }
    if (c.count < 0) return refuse("negative count");
    // Whole vectors travel in one message, with an int count.
    if (total > INT_MAX) return refuse("more than INT_MAX elements");
    if (auto accepts = predefined_op_accepts(c.op, type_class(c.type))) {
      if (!t->named) return refuse("predefined op on a derived type");
      if (!*accepts) return refuse("op not defined on this type");
    } else {
      int commutative = 1;
      if (c.op == MPI_OP_NULL || PMPI_Op_commutative(c.op, &commutative) != MPI_SUCCESS) return refuse("bad op");
      out.predefined_op = false;
      out.commutative = commutative != 0;
    }
    if (c.collective == Collective::reduce && (c.root < 0 || c.root >= p)) return refuse("bad root");
    out.predefined_type = t->named;
    out.count = total;
    out.bytes = total * t->size;
    // For Reduce, MPI_IN_PLACE is the root's alone: not a shared argument.
    out.in_place = c.collective != Collective::reduce && c.sbuf == MPI_IN_PLACE;
    return out;
  }
  auto block = type_bytes(c.count, c.type);
  if (!block) return refuse("bad count or type");
  switch (c.collective) {
    case Collective::bcast: out.bytes = *block; break;
    case Collective::allgather:
    case Collective::alltoall:
      out.bytes = *block * p;
      out.in_place = c.sbuf == MPI_IN_PLACE;
      break;
    default: return refuse("unknown collective");
  }
  if (out.bytes > INT_MAX) return refuse("more than INT_MAX bytes");
  if (c.collective == Collective::bcast && (c.root < 0 || c.root >= p)) return refuse("bad root");
  out.count = out.bytes;
  return out;
}

// ---- Process-wide state: rules, model, counts -------------------------------

std::atomic<std::shared_ptr<const Tuning>> g_tuning;
std::atomic<std::shared_ptr<const CostModel>> g_model;

std::shared_ptr<const Tuning> tuning() {
  auto t = g_tuning.load();
  if (!t) {
    static std::once_flag once;
    std::call_once(once, [] {
      if (!g_tuning.load()) g_tuning.store(std::make_shared<const Tuning>(Tuning::from_env()));
    });
    t = g_tuning.load();
  }
  return t;
}

std::shared_ptr<const CostModel> model() {
  auto m = g_model.load();
  if (!m) {
    static const auto fallback = std::make_shared<const CostModel>(default_cost_model());
    return fallback;
  }
  return m;
}

constexpr size_t max_algorithms = 8;  // per collective, "library" at 0
std::array<std::array<std::atomic<uint64_t>, max_algorithms>, collective_count> g_counts{};

size_t index_of(const Algorithm* a) {
  if (!a) return 0;
  auto list = algorithms_for(a->collective);
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i] == a) return i + 1;
  return 0;
}

void count(Collective c, const Algorithm* a) {
  // (The interposer counts taken / passed calls for the summary; these are per
  // algorithm.) Shared atomics cost every call: only while a report is wanted.
  if (config().report == 0) return;
  g_counts[static_cast<size_t>(c)][index_of(a)].fetch_add(1, std::memory_order_relaxed);
}

Shape shape_from(const Call& c, const Prepared& prep, const Hierarchy& h) {
  Shape s = shape_of(c.collective, prep.bytes, h);
  s.count = prep.count;
  s.commutative = prep.commutative;
  s.predefined_op = prep.predefined_op;
  s.predefined_type = prep.predefined_type;
  s.in_place = prep.in_place;
  s.oversubscribed = h.oversubscribed;
  return s;
}

// ---- Running an algorithm, with bytes for the non-reductions -----------------

int run_library(const Call& c, MPI_Comm comm);

// The private communicators `a` runs on, made here on first use: every rank
// of the call gets here at the same point, before any of a's messages. Only
// now, with an algorithm of Veneer's chosen, does the job get a communicator
// it did not ask for (topology/hierarchy.h). (Leaders and lanes are made by
// the algorithms that use them, on every rank, first thing.)
bool communicators_ready(const Algorithm& a, const Hierarchy& h) {
  if (h.comm() == MPI_COMM_NULL) return false;
  return !a.hierarchical || h.node_comm() != MPI_COMM_NULL;
}

int execute(const Algorithm& a, const Call& c, const Hierarchy& h) {
  // Should the library fail to make them, it is asked to do the call itself.
  if (!communicators_ready(a, h)) return run_library(c, h.parent);
  Args args;
  args.root = c.root;
  switch (c.collective) {
    case Collective::allreduce:
    case Collective::reduce:
    case Collective::reduce_scatter:
    case Collective::reduce_scatter_block:
      args.sbuf = c.sbuf;
      args.rbuf = c.rbuf;
      args.count = c.count;
      args.type = c.type;
      args.rcounts = c.collective == Collective::reduce_scatter ? c.rcounts : nullptr;
      args.op = c.op;
      return a.run(args, h);
    case Collective::bcast: {
      const bool root = h.rank == c.root;
      auto view = root ? ByteView::reading(c.rbuf, c.count, c.type) : ByteView::writing(c.rbuf, c.count, c.type);
      if (!view) return MPI_ERR_TYPE;
      args.rbuf = view->data();
      args.count = static_cast<int>(view->size());
      args.type = MPI_BYTE;
      VENEER_TRY(a.run(args, h));
      return root ? MPI_SUCCESS : view->finish();
    }
    case Collective::allgather:
    case Collective::alltoall: {
      const bool in_place = c.sbuf == MPI_IN_PLACE;
      const bool alltoall = c.collective == Collective::alltoall;
      auto out = ByteView::writing(c.rbuf, c.count * h.size, c.type, in_place && alltoall);
      if (!out) return MPI_ERR_TYPE;
      if (in_place && !alltoall) VENEER_TRY(out->load(static_cast<int64_t>(c.count) * h.rank, c.count));
      std::optional<ByteView> in;
      if (!in_place) {
        in = ByteView::reading(c.sbuf, alltoall ? c.scount * h.size : c.scount, c.stype);
        if (!in) return MPI_ERR_TYPE;
      }
      args.sbuf = in_place ? MPI_IN_PLACE : static_cast<const void*>(in->data());
      args.rbuf = out->data();
      args.count = static_cast<int>(out->size() / h.size);
      args.type = MPI_BYTE;
      VENEER_TRY(a.run(args, h));
      return out->finish();
    }
  }
  return MPI_ERR_INTERN;
}

int run_library(const Call& c, MPI_Comm comm) {
  switch (c.collective) {
    case Collective::allreduce: return PMPI_Allreduce(c.sbuf, c.rbuf, c.count, c.type, c.op, comm);
    case Collective::bcast: return PMPI_Bcast(c.rbuf, c.count, c.type, c.root, comm);
    case Collective::reduce: return PMPI_Reduce(c.sbuf, c.rbuf, c.count, c.type, c.op, c.root, comm);
    case Collective::allgather: return PMPI_Allgather(c.sbuf, c.scount, c.stype, c.rbuf, c.count, c.type, comm);
    case Collective::reduce_scatter: return PMPI_Reduce_scatter(c.sbuf, c.rbuf, c.rcounts, c.type, c.op, comm);
    case Collective::reduce_scatter_block:
      return PMPI_Reduce_scatter_block(c.sbuf, c.rbuf, c.count, c.type, c.op, comm);
    case Collective::alltoall: return PMPI_Alltoall(c.sbuf, c.scount, c.stype, c.rbuf, c.count, c.type, comm);
  }
  return MPI_ERR_INTERN;
}

// Whether a decision about `c` may be remembered (decisions.h): its handles
// cannot change meaning unnoticed, and reduce_scatter's counts array is not
// part of the key.
bool rememberable(const Call& c) {
  if (c.collective == Collective::reduce_scatter) return false;
  if (is_reduction(c.collective) && !predefined_op_accepts(c.op, TypeClass::none)) return false;
  for (MPI_Datatype t : {c.type, c.stype}) {
    if (t == MPI_DATATYPE_NULL) continue;
    auto info = TypeInfo::of(t);
    if (!info || !info->named) return false;
  }
  return true;
}

// Decides about a call not decided before: the library (algorithm null) or
// one of Veneer's algorithms on the communicator's hierarchy.
Remembered decide(const Call& c, MPI_Comm comm) {
  int inter = 0, p = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return {};
  if (PMPI_Comm_size(comm, &p) != MPI_SUCCESS || p < 2) return {};
  auto prep = prepare(c, p, nullptr);
  if (!prep || prep->bytes == 0) return {};
  auto rules = tuning();
  // A rule that sends this size to the library spares building the hierarchy.
  const Rule* rule = rules->rule_for(c.collective, prep->bytes);
  if (rule && rule->choices.size() == 1 && rule->choices[0] == "library") return {};
  const Hierarchy* h = topology::hierarchy(comm);
  if (!h) return {};
  const Shape s = shape_from(c, *prep, *h);
  auto m = model();
  const Choice choice = choose(s, *rules, *m);
  if (config().log_level >= LogLevel::debug)
    log(LogLevel::debug, "%s: %s: %s", describe(s).c_str(),
        std::string(choice.algorithm ? choice.algorithm->name : "library").c_str(), reason(choice, s).c_str());
  return {choice.algorithm, choice.algorithm ? h : nullptr};
}

std::optional<int> take(const Call& c, MPI_Comm comm) {
  if (!config().collectives || comm == MPI_COMM_NULL) {
    count(c.collective, nullptr);
    return std::nullopt;
  }
  const DecisionKey key = decision_key(c, comm);
  const Remembered* known = recall_decision(key);
  Remembered fresh;
  if (!known) {
    fresh = decide(c, comm);
    if (rememberable(c) && watch_communicator(comm)) remember_decision(key, fresh);
    known = &fresh;
  }
  count(c.collective, known->algorithm);
  if (!known->algorithm) return std::nullopt;
  return execute(*known->algorithm, c, *known->hierarchy);
}

}  // namespace

// ---- Public API --------------------------------------------------------------

void collectives_init() {
  g_tuning.store(std::make_shared<const Tuning>(Tuning::from_env()));
  forget_decisions();
}

void collectives_finalize() {
  decisions_finalize();
  topology::forget_hierarchy(MPI_COMM_WORLD);
}

std::optional<int> allreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return take({.collective = Collective::allreduce, .sbuf = sbuf, .rbuf = rbuf, .count = count, .type = type, .op = op},
              comm);
}

std::optional<int> bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  return take({.collective = Collective::bcast, .rbuf = buf, .count = count, .type = type, .root = root}, comm);
}

std::optional<int> reduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                          MPI_Comm comm) {
  return take({.collective = Collective::reduce,
               .sbuf = sbuf,
               .rbuf = rbuf,
               .count = count,
               .type = type,
               .op = op,
               .root = root},
              comm);
}

std::optional<int> allgather(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                             MPI_Datatype rtype, MPI_Comm comm) {
  return take({.collective = Collective::allgather,
               .sbuf = sbuf,
               .rbuf = rbuf,
               .count = rcount,
               .type = rtype,
               .scount = scount,
               .stype = stype},
              comm);
}

std::optional<int> reduce_scatter(const void* sbuf, void* rbuf, const int rcounts[], MPI_Datatype type, MPI_Op op,
                                  MPI_Comm comm) {
  return take({.collective = Collective::reduce_scatter,
               .sbuf = sbuf,
               .rbuf = rbuf,
               .type = type,
               .rcounts = rcounts,
               .op = op},
              comm);
}

std::optional<int> reduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype type, MPI_Op op,
                                        MPI_Comm comm) {
  return take({.collective = Collective::reduce_scatter_block,
               .sbuf = sbuf,
               .rbuf = rbuf,
               .count = rcount,
               .type = type,
               .op = op},
              comm);
}

std::optional<int> alltoall(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, int rcount,
                            MPI_Datatype rtype, MPI_Comm comm) {
  return take({.collective = Collective::alltoall,
               .sbuf = sbuf,
               .rbuf = rbuf,
               .count = rcount,
               .type = rtype,
               .scount = scount,
               .stype = stype},
              comm);
}

std::vector<AlgorithmCount> collectives_counts() {
  std::vector<AlgorithmCount> out;
  for (int i = 0; i < collective_count; ++i) {
    const Collective c = static_cast<Collective>(i);
    auto list = algorithms_for(c);
    for (size_t k = 0; k <= list.size(); ++k) {
      uint64_t n = g_counts[static_cast<size_t>(i)][k].load(std::memory_order_relaxed);
      if (n) out.push_back({c, k == 0 ? std::string_view("library") : list[k - 1]->name, n});
    }
  }
  return out;
}

void reset_collectives_counts() {
  for (auto& row : g_counts)
    for (auto& n : row) n.store(0, std::memory_order_relaxed);
}

std::string collectives_report() {
  std::string out;
  std::optional<Collective> current;
  for (const AlgorithmCount& entry : collectives_counts()) {
    if (current != entry.collective) {
      if (current) out += "\n";
      out += "  ";
      out += collective_name(entry.collective);
      out += ":";
      current = entry.collective;
    } else {
      out += ",";
    }
    out += " ";
    out += entry.algorithm;
    out += " ";
    out += std::to_string(entry.calls);
  }
  if (!out.empty()) out.insert(0, "collectives (calls per algorithm):\n").append("\n");
  return out;
}

std::string explain(Collective c, int64_t bytes, MPI_Comm comm) {
  const Hierarchy* h = topology::hierarchy(comm);
  if (!h) return "not taken: no hierarchy for this communicator (intercommunicator?)\n";
  Shape s = shape_of(c, bytes, *h);
  s.count = is_reduction(c) ? bytes / 8 : bytes;  // as if doubles
  s.oversubscribed = h->oversubscribed;
  return explain(s, *tuning(), *model());
}

void set_cost_model(const CostModel& m) {
  g_model.store(std::make_shared<const CostModel>(m));
  forget_decisions();
}
void set_profile(const topology::Profile& p) { set_cost_model(cost_model_from_profile(p)); }
const CostModel& cost_model() {
  // Models are replaced rarely; each one is kept alive for the process so references stay valid.
  static std::mutex keep_mutex;
  static std::vector<std::shared_ptr<const CostModel>> kept;
  auto m = model();
  std::lock_guard<std::mutex> lock(keep_mutex);
  if (kept.empty() || kept.back() != m) kept.push_back(m);
  return *kept.back();
}

std::optional<Shape> shape_of(const Call& call, const Hierarchy& h) {
  auto prep = prepare(call, h.size, nullptr);
  if (!prep) return std::nullopt;
  return shape_from(call, *prep, h);
}

std::string_view chosen_for(const Call& call, const Hierarchy& h) {
  auto s = shape_of(call, h);
  if (!s) return "library";
  const Choice c = choose(*s, *tuning(), *model());
  return c.algorithm ? c.algorithm->name : std::string_view("library");
}

std::optional<int> run_with(std::string_view algorithm, const Call& call, const Hierarchy& h, std::string* why_not) {
  auto prep = prepare(call, h.size, why_not);
  if (!prep) return std::nullopt;
  if (algorithm == "library") return run_library(call, h.parent);
  const Algorithm* a = find_algorithm(call.collective, algorithm);
  if (!a) {
    if (why_not) *why_not = "unknown algorithm";
    return std::nullopt;
  }
  if (!eligible(*a, shape_from(call, *prep, h), why_not)) return std::nullopt;
  if (prep->bytes == 0) return MPI_SUCCESS;  // nothing to move; buffers untouched
  return execute(*a, call, h);
}

}  // namespace veneer::algorithms
