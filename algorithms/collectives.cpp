// SPDX-License-Identifier: BSD-3-Clause
// The entry points: whether a call is taken (admission.h), which algorithm
// runs it (decided once per distinct call, select.h, then remembered:
// decisions.h), running it (execution.h), and counting it (report.h).
#include "algorithms/collectives.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "algorithms/admission.h"
#include "algorithms/decisions.h"
#include "algorithms/execution.h"
#include "algorithms/measured.h"
#include "algorithms/report.h"
#include "algorithms/select.h"
#include "algorithms/state.h"
#include "algorithms/trial.h"
#include "support/config.h"
#include "support/log.h"
#include "topology/hierarchy.h"

namespace veneer::algorithms {
namespace {

// The challengers queued behind a challenger (Remembered::next_challenger):
// the next one, then the formulas' best; *chained: whether the head is also
// tried where the challenger takes the pattern.
uint8_t queue_behind(const Choice& choice, bool* chained) {
  const size_t second = candidate_index(choice.next_challenger);
  const size_t third = candidate_index(choice.third_challenger);
  auto next = static_cast<uint8_t>(second < 16 ? second : 0);
  *chained = next != 0 && choice.next_against_first;
  if (third == 0 || third >= 16) return next;
  if (next == 0) {
    *chained = true;
    return static_cast<uint8_t>(third);
  }
  return static_cast<uint8_t>(next | third << 4);
}

// The queue behind a pattern's first trial (Remembered::next_challenger):
// behind a challenger, queue_behind()'s; behind the model's choice on
// trial (`model_tried`), its runner-up (Choice::runner_up; *chained: tried
// against the choice where it is kept, against the library where it is
// returned), else its fallback, tried where the choice is returned to the
// library (Choice::fallback); else none.
uint8_t queue_for(const Choice& choice, bool challenged, bool model_tried, bool* chained) {
  *chained = false;
  if (challenged) return queue_behind(choice, chained);
  const Algorithm* next = choice.runner_up ? choice.runner_up : choice.fallback;
  if (!model_tried || !next) return 0;
  const size_t k = candidate_index(next);
  if (k == 0 || k >= 16) return 0;
  *chained = choice.runner_up != nullptr;
  return static_cast<uint8_t>(k);
}

// What a decision reads before the communicator's layout: the call's shape,
// the rules in force, and whether comm's first calls pass undecided (not
// on MPI_COMM_WORLD, never made per use, nor under a user's rule,
// VENEER_<COLLECTIVE>, obeyed at once). nullopt: the library, undecided
// whatever comm's layout (an intercommunicator, one rank, no bytes, a call
// Veneer cannot run, a rule giving the size to the library). It reads only
// what MPI requires every rank of the call to agree on, so every rank
// counts the same calls undecided.
struct Prelude {
  Shape shape;
  std::shared_ptr<const Tuning> rules;
  bool sight_passes = false;
};
std::optional<Prelude> prelude(const Call& call, MPI_Comm comm) {
  const Call c = decision_call(call);  // its counts bucketed where they are
  int inter = 0, p = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return std::nullopt;
  if (PMPI_Comm_size(comm, &p) != MPI_SUCCESS || p < 2) return std::nullopt;
  auto s = admit(c, p);
  if (!s || s->bytes == 0) return std::nullopt;
  Prelude out{.shape = *s, .rules = current_tuning()};
  bool users = false;
  const Rule* rule = out.rules->rule_for(c.collective, s->bytes, &users);
  if (rule && rule->choices.size() == 1 && rule->choices[0] == "library") return std::nullopt;
  out.sight_passes = comm != MPI_COMM_WORLD && !(users && rule && !rule->choices.empty());
  return out;
}

// Decides about a call not decided before: the library (algorithm null) or
// one of Veneer's algorithms on the communicator's hierarchy; for bcast and
// reduce, once for a root that stays and once for one that moved.
// `commutative`: what the decision would be were the call's user-defined op
// commutative or not (a probe: not counted in the report).
//
// `undecided` (a call's own decision): set for the first kUndecidedCalls
// calls that would be decided on a communicator (MPI_COMM_WORLD and calls
// under a user's rule excepted: Prelude::sight_passes), which go to the
// library undecided and are not remembered; the next call is decided. A
// communicator made per use and given one collective (duplicated per
// solve, split for one reduction) then costs no decision, no layout, no
// watch and no scan at its free: that call's decision cost 1.3 us over a
// 1 us allreduce at 2 ranks and 5 us at 4 oversubscribed ranks (Open
// MPI), a call passed undecided 0.2-0.3 us, so passing more of them
// before deciding costs a communicator that lives longer more than it
// spares one that does not.
Remembered decide(const Call& c, MPI_Comm comm, std::optional<bool> commutative = std::nullopt,
                  bool* undecided = nullptr) {
  std::optional<Prelude> pre = prelude(c, comm);
  if (!pre) return {};
  Shape* s = &pre->shape;
  if (commutative) s->commutative = *commutative;
  const std::shared_ptr<const Tuning>& rules = pre->rules;
  const Hierarchy* h = undecided && pre->sight_passes
                           ? topology::hierarchy_after_sightings(comm, kUndecidedCalls, undecided)
                           : topology::hierarchy(comm);
  if (!h) return {};
  place(*s, *h);
  auto m = current_model();
  // The choice for s, or for a variant of it (`pattern` names the variant in
  // the log; the report counts the call's own decision only).
  // The choice, and whether a trial decides it on the job's own calls: the
  // model's choice (where VENEER_TRIAL asks for it, on a rank count the
  // profile did not time, or where its lead is thin), or on such a count,
  // where the model kept the library, the challenger (algorithms/trial.h).
  const bool triable_call = triable(c);
  const bool trial_timed = config().trial_timed;
  const bool large_call = tried_whatever_its_lead(c);
  bool tried = false, challenged = false, chained = false, thin = false;
  // The challengers after (Remembered::next_challenger); `chained`: the
  // head is tried also where the first takes the pattern.
  uint8_t next = 0;
  // What the challenger is tried against (1 + its index; 0 the library).
  uint8_t incumbent = 0;
  auto decide_for = [&](const Shape& shape, const char* pattern, uint8_t condition) {
    Choice choice = *pattern || commutative ? choose_variant(shape, *rules, *m) : choose(shape, *rules, *m);
    // Where the model kept the library, what won beside this shape on the
    // job's own calls is tried first (trial.h, neighbours_winner).
    bool first_asked = false;
    if (triable_call && !choice.algorithm && choice.decision == Decision::library_kept &&
        try_first(choice, neighbours_winner(c, *h, condition, &first_asked), shape, *m) && first_asked &&
        h->rank == 0 && config().log_level >= LogLevel::info)
      log(LogLevel::info, "%s%s: %s, which won beside it on this communicator, is tried first against the library",
          describe(shape).c_str(), pattern, std::string(choice.challenger->name).c_str());
    if (config().log_level >= LogLevel::debug)
      log(LogLevel::debug, "%s%s: %s: %s", describe(shape).c_str(), pattern,
          std::string(choice.algorithm ? choice.algorithm->name : "library").c_str(), reason(choice, shape).c_str());
    // A thin lead on a count the profile timed (select.h kThinLead) is
    // tried, and kept only where it does not trail there (when in doubt,
    // pass through): Open MPI's rooted reduce of 512 B-1 KiB on 4 ranks,
    // which two_level led by 1.12-1.16x in the profile, ran at 0.79-0.85
    // of the library in OSU's timing loop; MPICH's allgather of 8-16 B and
    // 512 B per rank first since a barrier, which two_level led by
    // 1.27-1.40x on the slowest rank, ran at 0.64-0.79 of the library on
    // OSU's average (the ranks' mean).
    // Above kFullTrialBytes a call, any lead of the model's choice is tried
    // (trial.h): under MPICH on 3-4 ranks, two_level's 512 KiB-1 MiB reduce
    // after a barrier, 2x ahead of the library in the profile, ran 1.2-1.4x
    // behind it in the launches where the library ran its fast way. Not
    // where the root moved: blocks there cover whole turns of the root
    // (five calls on 4 ranks), and binomial's 512 KiB reduce, so tried under
    // MPICH on 4 ranks, ran its model check batches at up to 1.6x of its own
    // time forced, the library's trial calls among them.
    tried = triable_call && choice.algorithm && choice.decision == Decision::model &&
            (trial_timed || choice.untimed || choice.thin_lead || (large_call && condition != 1));
    thin = choice.thin_lead && tried;
    challenged = triable_call && !choice.algorithm && choice.challenger;
    next = queue_for(choice, challenged, tried, &chained);
    incumbent = 0;
    if (challenged) {
      tried = true;
      thin = choice.thin_lead;
      return choice.challenger;
    }
    // The model's choice, thinly ahead of the next fastest: that one is
    // tried against it (Choice::runner_up).
    if (triable_call && !tried && choice.runner_up) {
      tried = challenged = thin = true;
      incumbent = static_cast<uint8_t>(candidate_index(choice.algorithm));
      return choice.runner_up;
    }
    return choice.algorithm;
  };
  auto note_trial = [&](Remembered& r, uint8_t condition) {
    if (tried) r.on_trial |= static_cast<uint8_t>(1u << condition);
    if (challenged) r.challenged |= static_cast<uint8_t>(1u << condition);
    if (thin) r.challenged |= Remembered::thin_bit(condition);
    if (chained) r.chained |= static_cast<uint8_t>(1u << condition);
    r.next_challenger[condition] = next;
    r.incumbent[condition] = incumbent;
  };
  Remembered out{.algorithm = decide_for(*s, "", 0), .collective = c.collective};
  note_trial(out, 0);
  // The alternative for a variant of the call's pattern: 1 + its index, 0
  // the library; nullopt where it is the same choice and neither is on
  // trial (a trial on one pattern says nothing of another: a rotating
  // root's verdict would decide the calls between barriers).
  const bool own_on_trial = out.on_trial != 0;
  auto alternative = [&](Shape variant, bool Shape::*pattern, const char* name,
                         uint8_t condition) -> std::optional<uint8_t> {
    variant.*pattern = true;
    const Algorithm* a = decide_for(variant, name, condition);
    if (a == out.algorithm && !tried && !own_on_trial) return std::nullopt;
    return static_cast<uint8_t>(candidate_index(a));
  };
  if (c.collective == Collective::bcast || c.collective == Collective::reduce)
    if (auto k = alternative(*s, &Shape::moving_root, ", root moved", 1)) {
      out.varies |= Remembered::moved_root;
      out.moving = *k;
      note_trial(out, 1);
    }
  if (auto k = alternative(*s, &Shape::after_barrier, ", first since a barrier", 2)) {
    out.varies |= Remembered::first_since_barrier;
    out.after_barrier = *k;
    note_trial(out, 2);
    h->barriers_counted.store(true, std::memory_order_relaxed);
    g_barriers_matter.store(true, std::memory_order_relaxed);
  }
  if (out.algorithm || out.varies) out.hierarchy = h;
  return out;
}

// The library, with nothing on trial and nothing that varies with the
// call's pattern.
bool plainly_library(const Remembered& r) { return !r.algorithm && !r.varies && !r.on_trial; }

// Whether `fresh`, the decision about a call with a user-defined op, is what
// any user-defined op would get: the library, whether the op is commutative
// or not (an op's shape holds nothing else of it). Only such a decision is
// remembered under the op's handle, which may be freed and come back as
// another op unseen (a decision that depended on the op could then differ
// between ranks that remembered it and ranks that decided afresh). Deciding
// every such call afresh cost 35-50 ns over the library at 1 rank (Open MPI).
bool library_for_any_user_op(const Call& c, MPI_Comm comm, const Remembered& fresh) {
  return plainly_library(fresh) && plainly_library(decide(c, comm, true)) && plainly_library(decide(c, comm, false));
}

// Whether `a`, decided for c's bucket of counts (decision_count), can run
// c's own counts: admitted and eligible as they are (a bucket's lowest
// count may be within a limit its larger ones pass). True where c's counts
// are the bucket's own. Past half the largest message (a node's data at its
// leader, node_data_at_leader), not: a trial's opponent, or the next
// challenger, would need the same answer. Depends on what every rank of
// the call agrees on alone (a broadcast's, allgather's or alltoall's bytes,
// agreed_call), so every rank answers alike.
bool runs_as_decided(const Algorithm& a, const Call& c, const Hierarchy& h) {
  if (!counts_bucketed(c.collective)) return true;
  if (moves_bytes(c.collective)) {
    const int bytes = agreed_call(c, false).count;
    if (decision_count(bytes) == bytes) return true;
  } else if (decision_count(c.count) == c.count && decision_count(c.scount) == c.scount) {
    return true;
  }
  auto s = admit(c, h.size);
  if (!s) return false;
  place(*s, h);
  if (s->bytes * std::max(s->max_ranks_per_node, 1) > INT_MAX / 2) return false;
  return eligible(a, *s);
}

// runs_as_decided() for the choice `a` of r's pattern `condition`, and,
// where it is on trial, for its opponent, which runs half the calls.
bool both_run_as_decided(const Remembered& r, uint8_t condition, const Algorithm& a, const Call& c,
                         const Hierarchy& h) {
  const Algorithm* opponent = (r.on_trial >> condition & 1u) ? r.incumbent_for(condition) : nullptr;
  return runs_as_decided(a, c, h) && (!opponent || runs_as_decided(*opponent, c, h));
}

// What the trial of r's pattern `condition` asks of its choice (trial.h,
// TrialRole), from r's bits: the same for every call of that trial, the
// first after a verdict too (a trial is keyed by its role).
TrialRole role_of(const Remembered& r, uint8_t condition) {
  const bool thin = (r.challenged & Remembered::thin_bit(condition)) != 0;
  if (r.challenged >> condition & 1u) return thin ? TrialRole::thin_challenger : TrialRole::challenger;
  return thin ? TrialRole::thin : TrialRole::model;
}

std::optional<int> take(const Call& c, MPI_Comm comm) {
  if (!config().collectives || comm == MPI_COMM_NULL) {
    count_call(c.collective, nullptr);
    return std::nullopt;
  }
  DecisionKey key = decision_key(c, comm);
  // Reduce_scatter by the total of its counts (deciding it afresh on every
  // call cost 1.2 us over a 4.5 us call, 4 ranks, Open MPI); only a decision
  // with nothing on trial, as trials are not kept for it.
  const bool by_total = key_scatter_total(c, comm, key);
  const Remembered* known = c.collective != Collective::reduce_scatter || by_total ? recall_decision(key) : nullptr;
  Remembered fresh;
  if (!known) {
    bool undecided = false;
    fresh = decide(c, comm, std::nullopt, &undecided);
    if (undecided) {
      count_call(c.collective, nullptr);
      return std::nullopt;
    }
    if (user_op_call(c)
            ? (c.collective != Collective::reduce_scatter || by_total) && library_for_any_user_op(c, comm, fresh)
            : rememberable(c) || (by_total && fresh.on_trial == 0))
      if (watch_communicator(comm)) remember_decision(key, fresh);
    known = &fresh;
  }
  const uint8_t condition = known->condition(c.root);
  const Algorithm* a = known->for_root(c.root);
  const Hierarchy* h = known->hierarchy;  // (known may be the slot remember_decision refills)
  if (a && !both_run_as_decided(*known, condition, *a, c, *h)) {
    count_call(c.collective, nullptr);
    return std::nullopt;
  }
  if (a && (known->on_trial >> condition & 1u)) {
    // The model's choice, or a challenger, not yet confirmed on this pattern's own calls.
    std::optional<int> ran;
    Remembered settled = *known;
    Verdict v = trial_run(*a, c, *h, condition, role_of(settled, condition), settled.incumbent_for(condition), &ran);
    if (v != Verdict::trying) {
      // A trial over before this call, with another challenger after it:
      // that one's trial has the call. Walked from the trial book on every
      // rank alike, whatever this thread's table remembered (a rank that
      // decided the call again starts from the first challenger).
      settled.settle(condition, v == Verdict::keep);
      while (!ran && (settled.on_trial >> condition & 1u)) {
        v = trial_run(*settled.alternative_for(condition), c, *h, condition, role_of(settled, condition),
                      settled.incumbent_for(condition), &ran);
        if (v == Verdict::trying) break;
        settled.settle(condition, v == Verdict::keep);
      }
      if (rememberable(c) && watch_communicator(comm)) remember_decision(key, settled);
    }
    if (ran) return ran;
    a = settled.alternative_for(condition);
  }
  count_call(c.collective, a);
  if (!a) return std::nullopt;
  return execute(*a, c, *h);
}

}  // namespace

std::atomic<bool> g_barriers_matter{false};

void count_buckets_for(const Tuning& t) {
  auto whole = [](const std::vector<Rule>& rules) {
    return std::all_of(rules.begin(), rules.end(),
                       [](const Rule& r) { return r.lo == 0 && r.hi == std::numeric_limits<int64_t>::max(); });
  };
  uint32_t bits = 0;
  for (int i = 0; i < collective_count; ++i) {
    // Reduce_scatter is remembered by the total of its counts (key_scatter_total).
    if (static_cast<Collective>(i) == Collective::reduce_scatter) continue;
    if (whole(t.defaults[i]) && whole(t.user[i])) bits |= 1u << i;
  }
  detail::g_count_buckets.store(bits, std::memory_order_relaxed);
}

void seen_undecided(const Call& c, MPI_Comm comm) {
  if (!config().collectives || comm == MPI_COMM_NULL) return;
  if (std::optional<Prelude> pre = prelude(c, comm); pre && pre->sight_passes) topology::count_sighting(comm);
}

void note_barrier(MPI_Comm comm) {
  // Counted only where comm's own decisions depend on barriers
  // (Hierarchy::barriers_counted); noted either way, so that the next
  // barrier on comm asks nothing of the library.
  const NotedBarriers::Entry* e = noted_barriers(comm);
  const Hierarchy* h = e ? e->hierarchy : topology::cached_hierarchy(comm);
  if (!h) return;
  if (h->barriers_counted.load(std::memory_order_relaxed)) h->barriers.fetch_add(1, std::memory_order_relaxed);
  if (!e) note_barriers_of(comm, h);
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

}  // namespace veneer::algorithms
