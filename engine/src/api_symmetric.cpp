// Communicator::allgather / allgatherv / alltoall / alltoallv /
// reduce_scatter_block / reduce_scatter: argument checks (before anything
// moves), algorithm selection (the registry's, strata/collectives/select.hpp),
// then submit. Also the allreduce selection (resolve_allreduce, called by
// engine.cpp's prep_reduce).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "checks.hpp"
#include "comm.hpp"
#include "select.hpp"
#include "strata/engine.hpp"

namespace strata {

namespace {

using namespace detail;  // NOLINT: argument checks and algorithm choice (checks.hpp, select.hpp)

// The algorithm of a step-schedule collective (the public selection,
// strata/collectives/select.hpp; "auto" = the compiler decides by the registry's rules).
coll::Algorithm resolve_uncached(coll::Kind kind, const CollOptions& o, const CommImpl& impl) {
  return select_uncached(kind, o, impl.rank());
}

// resolve_uncached() through the per-thread memo (the communicator's rank is part of the key).
coll::Algorithm resolve(coll::Kind kind, const CollOptions& o, const CommImpl& impl) {
  return memo_algorithm(kind, o, impl.rank(), [&] { return resolve_uncached(kind, o, impl); });
}

// STRATA_ALLTOALL_MAX_OUTSTANDING: remote operations (puts / gets) an
// alltoall(v) keeps in flight per rank; default 128 (Chaimov et al.). Read once.
std::size_t alltoall_max_outstanding() {
  static const std::size_t v = [] {
    const std::string* set = coll::Environment::process().find("STRATA_ALLTOALL_MAX_OUTSTANDING");
    const std::string s = set == nullptr ? std::string() : *set;
    if (s.empty()) return std::size_t{128};
    char* end = nullptr;
    const long long k = std::strtoll(s.c_str(), &end, 10);
    if (end == s.c_str() || *end != '\0' || k < 1 || k > (1 << 20))
      throw Error(Errc::invalid_argument,
                  "STRATA_ALLTOALL_MAX_OUTSTANDING='" + s + "': expected an integer in [1, 1048576]");
    return static_cast<std::size_t>(k);
  }();
  return v;
}

// One-shot submission (the plan-cache key of CommImpl::submit covers the v-variant counts).
Future<void> submit_v(CommImpl& impl, const coll::Call& c, const void* send, void* recv) {
  return impl.submit(c, send, recv);
}

Future<void> do_reduce_scatter(const std::shared_ptr<CommImpl>& impl, coll::Kind kind, const void* send, void* recv,
                               std::size_t count, const std::vector<std::size_t>* counts, dag::DataType dt,
                               dag::ReduceOp op, std::shared_ptr<const dag::UserReduce> u, std::size_t esize,
                               const CollOptions& opts) {
  const char* n = coll::to_string(kind);
  need(impl, n);
  const CommImpl& c = *impl;
  const auto nn = static_cast<std::size_t>(c.size());
  std::size_t total = 0, mine = 0;
  if (counts) {
    total = coll::check_reduce_counts(site(n, c), *counts, esize);
    mine = (*counts)[static_cast<std::size_t>(c.rank())];
  } else {
    coll::check_count(site(n, c), count, esize);
    coll::check_count(site(n, c), count * nn, esize);
    total = count * nn;
    mine = count;
  }
  // In place (MPI_IN_PLACE): recv holds the whole input (total elements); the result goes to its start.
  const bool inplace = send == in_place;
  if (!inplace) check_buffer(n, c, "send", send, total * esize);
  check_buffer(n, c, "recv", recv, (inplace ? total : mine) * esize);
  if (!inplace) check_overlap(n, c, send, total * esize, recv, mine * esize);
  if (!u) coll::check_op(site(n, c), op, dt);
  // Default options, a built-in operator, equal blocks: the window slot's
  // memo starts the call without building its key (as allreduce does).
  std::optional<CommImpl::PlainSig> sig;
  if (!counts && !u && plain_options(opts) && dag::reduce_kernel(op, dt) != nullptr) {
    sig = CommImpl::PlainSig::make(kind, count, dt, inplace, op);
    if (auto f = impl->submit_plain(*sig, inplace ? nullptr : send, recv)) return std::move(*f);
  }
  coll::Call call;
  call.kind = kind;
  call.count = counts ? mine : count;
  if (counts) call.counts = *counts;
  call.dtype = dt;
  call.op = op;
  call.user_op = std::move(u);
  call.in_place = inplace;
  apply_sync(call, opts);
  call.algo = resolve(kind, opts, c);
  if (call.user_op && !call.user_op->commutative)
    coll::check_rank_order(site(n, c), kind, call.algo.name, call.user_op->name);
  call.checked = true;
  if (sig) return impl->submit(call, inplace ? nullptr : send, recv, nullptr, false, &*sig);
  return submit_v(*impl, call, inplace ? nullptr : send, recv);
}

}  // namespace

namespace detail {

// Allreduce: the public selection (the tuning table's crossovers when automatic).
namespace {
coll::Algorithm resolve_allreduce_uncached(const CollOptions& o, const CommImpl& impl, const dag::UserReduce* user_op,
                                           std::uint64_t bytes);
}  // namespace

// resolve_allreduce_uncached() with a small per-thread memo: its result depends
// only on the communicator, the size, commutativity and the four option
// strings (the environment is read once). Building it cost ~1,600
// instructions of a small allreduce's ~8,000 on the calling thread (callgrind).
coll::Algorithm resolve_allreduce(const CollOptions& o, const CommImpl& impl, const dag::UserReduce* user_op,
                                  std::uint64_t bytes) {
  struct Entry {
    std::uint64_t serial = 0;
    std::uint64_t bytes = 0;
    bool noncomm = false;
    std::string algorithm, tree, fragment, direction;
    coll::Algorithm result;
  };
  constexpr std::size_t kEntries = 8;
  thread_local std::array<Entry, kEntries> memo;
  thread_local std::size_t next = 0;
  const bool noncomm = user_op != nullptr && !user_op->commutative;
  for (const Entry& e : memo)
    if (e.serial == impl.serial && e.bytes == bytes && e.noncomm == noncomm && e.algorithm == o.algorithm &&
        e.tree == o.tree && e.fragment == o.fragment && e.direction == o.direction)
      return e.result;
  coll::Algorithm a = resolve_allreduce_uncached(o, impl, user_op, bytes);
  Entry& e = memo[next];
  next = (next + 1) % kEntries;
  e = Entry{impl.serial, bytes, noncomm, o.algorithm, o.tree, o.fragment, o.direction, a};
  return a;
}

namespace {
coll::Algorithm resolve_allreduce_uncached(const CollOptions& o, const CommImpl& impl, const dag::UserReduce* user_op,
                                           std::uint64_t bytes) {
  return select_uncached(coll::Kind::allreduce, o, impl.rank(), std::string(), impl.group, bytes, user_op);
}
}  // namespace

}  // namespace detail

Future<void> Communicator::allgather(const void* send, std::size_t count, void* recv, Datatype type,
                                     const CollOptions& opts) {
  const char* n = "allgather";
  need(impl_, n);
  const CommImpl& c = *impl_;
  const std::size_t es = size_of(type);
  const auto nn = static_cast<std::size_t>(c.size());
  coll::check_count(site(n, c), count, es);
  coll::check_count(site(n, c), count * nn, es);
  const bool inplace = send == in_place;
  if (!inplace) check_buffer(n, c, "send", send, count * es);
  check_buffer(n, c, "recv", recv, count * nn * es);
  if (!inplace) check_overlap(n, c, send, count * es, recv, count * nn * es);
  const auto sig = detail::CommImpl::PlainSig::make(coll::Kind::allgather, count, detail::to_dag(type), inplace);
  const bool plain = plain_options(opts);
  if (plain)
    if (auto f = impl_->submit_plain(sig, inplace ? nullptr : send, recv)) return std::move(*f);
  coll::Call call;
  call.kind = coll::Kind::allgather;
  call.count = count;
  call.dtype = detail::to_dag(type);
  call.in_place = inplace;
  call.checked = true;
  apply_sync(call, opts);
  call.algo = resolve(call.kind, opts, c);
  return impl_->submit(call, inplace ? nullptr : send, recv, nullptr, false, plain ? &sig : nullptr);
}

Future<void> Communicator::allgatherv(const void* send, std::size_t count, void* recv,
                                      const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs,
                                      Datatype type, const CollOptions& opts) {
  const char* n = "allgatherv";
  need(impl_, n);
  const CommImpl& c = *impl_;
  const std::size_t es = size_of(type);
  coll::check_count(site(n, c), count, es);
  const std::size_t extent = coll::check_blocks(site(n, c), "counts", "displs", "recv", counts, displs, es, false);
  const auto me = static_cast<std::size_t>(c.rank());
  const bool inplace = send == in_place;
  if (!inplace && count != counts[me])
    bad(n, c,
        "argument 'count' = " + std::to_string(count) + " differs from counts[" + std::to_string(me) +
            "] = " + std::to_string(counts[me]));
  if (!inplace) check_buffer(n, c, "send", send, count * es);
  check_buffer(n, c, "recv", recv, extent * es);
  if (!inplace) check_overlap(n, c, send, count * es, recv, extent * es);
  coll::Call call;
  call.kind = coll::Kind::allgatherv;
  call.checked = true;
  call.count = counts[me];
  call.counts = counts;
  call.displs = displs;
  call.dtype = detail::to_dag(type);
  call.in_place = inplace;
  call.algo = resolve(call.kind, opts, c);
  apply_sync(call, opts);
  return submit_v(*impl_, call, inplace ? nullptr : send, recv);
}

Future<void> Communicator::alltoall(const void* send, void* recv, std::size_t count, Datatype type,
                                    const CollOptions& opts) {
  const char* n = "alltoall";
  need(impl_, n);
  const CommImpl& c = *impl_;
  const std::size_t es = size_of(type);
  const auto nn = static_cast<std::size_t>(c.size());
  coll::check_count(site(n, c), count, es);
  coll::check_count(site(n, c), count * nn, es);
  const bool inplace = send == in_place;  // blocks are read from recv, then overwritten
  if (!inplace) check_buffer(n, c, "send", send, count * nn * es);
  check_buffer(n, c, "recv", recv, count * nn * es);
  if (!inplace) check_overlap(n, c, send, count * nn * es, recv, count * nn * es);
  const auto sig = detail::CommImpl::PlainSig::make(coll::Kind::alltoall, count, detail::to_dag(type), inplace);
  const bool plain = plain_options(opts);
  if (plain)
    if (auto f = impl_->submit_plain(sig, inplace ? nullptr : send, recv)) return std::move(*f);
  coll::Call call;
  call.kind = coll::Kind::alltoall;
  call.checked = true;
  call.count = count;
  call.dtype = detail::to_dag(type);
  call.in_place = inplace;
  call.on_block = opts.on_block;
  apply_sync(call, opts);
  call.algo = resolve(call.kind, opts, c);
  call.algo.max_outstanding = alltoall_max_outstanding();
  return impl_->submit(call, inplace ? nullptr : send, recv, nullptr, false, plain ? &sig : nullptr);
}

Future<void> Communicator::alltoallv(const void* send, const std::vector<std::size_t>& send_counts,
                                     const std::vector<std::size_t>& send_displs, void* recv,
                                     const std::vector<std::size_t>& recv_counts,
                                     const std::vector<std::size_t>& recv_displs, Datatype type,
                                     const CollOptions& opts) {
  const char* n = "alltoallv";
  need(impl_, n);
  const CommImpl& c = *impl_;
  const std::size_t es = size_of(type);
  // In place (MPI_IN_PLACE): send_counts / send_displs are ignored, the receive ones describe both sides.
  const bool inplace = send == in_place;
  const std::vector<std::size_t>& scnt = inplace ? recv_counts : send_counts;
  const std::vector<std::size_t>& sdsp = inplace ? recv_displs : send_displs;
  const std::size_t sext =
      coll::check_blocks(site(n, c), "send_counts", "send_displs", "send", scnt, sdsp, es, /*allow_overlap=*/true);
  const std::size_t rext = coll::check_blocks(site(n, c), "recv_counts", "recv_displs", "recv", recv_counts,
                                              recv_displs, es, /*allow_overlap=*/false);
  const auto me = static_cast<std::size_t>(c.rank());
  if (!inplace) coll::check_self_block(site(n, c), send_counts, recv_counts);
  if (!inplace) check_buffer(n, c, "send", send, sext * es);
  check_buffer(n, c, "recv", recv, rext * es);
  if (!inplace) check_overlap(n, c, send, sext * es, recv, rext * es);
  coll::Call call;
  call.kind = coll::Kind::alltoallv;
  call.checked = true;
  call.count = recv_counts[me];
  call.counts = scnt;
  call.displs = sdsp;
  call.rcounts = recv_counts;
  call.rdispls = recv_displs;
  call.dtype = detail::to_dag(type);
  call.in_place = inplace;
  call.algo = resolve(call.kind, opts, c);
  call.algo.max_outstanding = alltoall_max_outstanding();
  call.on_block = opts.on_block;
  apply_sync(call, opts);
  return submit_v(*impl_, call, inplace ? nullptr : send, recv);
}

Future<void> Communicator::reduce_scatter_block(const void* send, void* recv, std::size_t count, Datatype type, Op op,
                                                const CollOptions& opts) {
  return do_reduce_scatter(impl_, coll::Kind::reduce_scatter_block, send, recv, count, nullptr, detail::to_dag(type),
                           detail::to_dag(op), nullptr, size_of(type), opts);
}

Future<void> Communicator::reduce_scatter_block(const void* send, void* recv, std::size_t count, const UserOp& op,
                                                const CollOptions& opts) {
  need(impl_, "reduce_scatter_block");
  return do_reduce_scatter(impl_, coll::Kind::reduce_scatter_block, send, recv, count, nullptr, dag::DataType::u8,
                           dag::ReduceOp::sum, wrap(op, "reduce_scatter_block", *impl_), op.elem_size, opts);
}

Future<void> Communicator::reduce_scatter(const void* send, void* recv, const std::vector<std::size_t>& counts,
                                          Datatype type, Op op, const CollOptions& opts) {
  return do_reduce_scatter(impl_, coll::Kind::reduce_scatter, send, recv, 0, &counts, detail::to_dag(type),
                           detail::to_dag(op), nullptr, size_of(type), opts);
}

}  // namespace strata
