// multigrid on strata: halo exchange with one-sided put_signal into the
// neighbours' ghost slots (strata::Window), interior smoothing overlapped with
// it, "slot free again" signals for flow control; residual norm by allreduce,
// coarse grid by allgather (see multigrid_core.hpp).
//   strata-run -n 4 --hosts 2 --timeout 120 -- multigrid --n 64 --boxes 2 --check
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../common/strata_app_main.hpp"
#include "multigrid_core.hpp"
#include "strata/strata.hpp"

namespace {

// Tags: bit 31 = "free" (else data), bits 30..24 level, bit 23 parity,
// bits 22..0 the receiver's local box (data) or the signalling rank (free).
std::uint32_t data_tag(int l, int par, int box) {
  return static_cast<std::uint32_t>(l) << 24 | static_cast<std::uint32_t>(par) << 23 | static_cast<std::uint32_t>(box);
}
std::uint32_t free_tag(int l, int par, int rank) { return 0x80000000u | data_tag(l, par, rank); }

class StrataBackend {
 public:
  explicit StrataBackend(strata::Communicator comm) : comm_(std::move(comm)) {}
  int rank() const { return comm_.rank(); }
  int size() const { return comm_.size(); }

  void setup(double* recv, std::size_t doubles) {
    recv_base_ = recv;
    win_ = comm_.create_window(recv, doubles * sizeof(double));
  }

  // --halo graph: the exchange of one step as one alltoallv. Faces travel per
  // neighbour in the order of their receive slots (the sender's remote_off is
  // the receiver's slot offset, so both sides agree); interior() is the call's
  // CollOptions::compute node, beside the transfers; on_block unpacks each
  // neighbour's faces as soon as its block landed. Returns when all is done.
  void exchange(int l, int par, const std::vector<mg::Msg>& sends, const std::vector<mg::Msg>& recvs,
                const std::function<void()>& interior, const std::function<void(const mg::Msg&)>& unpack) {
    const Layout& lay = layout(static_cast<std::size_t>(l) * 2 + static_cast<std::size_t>(par), sends, recvs);
    for (std::size_t p = 0; p < lay.out.size(); ++p) {
      double* d = sbuf_.data() + lay.sd[p];
      for (const mg::Msg* m : lay.out[p]) d = std::copy(m->local, m->local + m->count, d);
    }
    strata::CollOptions opts;
    opts.compute = interior;
    opts.on_block = [&lay, &unpack](int src, void* block, std::size_t) {
      auto* at = static_cast<double*>(block);
      for (const mg::Msg* m : lay.in[static_cast<std::size_t>(src)]) {
        mg::Msg landed = *m;
        landed.local = at;  // unpack straight from the block
        unpack(landed);
        at += m->count;
      }
    };
    comm_.alltoallv(sbuf_.data(), lay.sc, lay.sd, rbuf_.data(), lay.rc, lay.rd, strata::Datatype::float64, opts).get();
  }

  // Waits until each receiver freed the slot set of this (level, parity) (its
  // "free" signal of the exchange two before), then put_signals every face.
  void begin(int l, int par, const std::vector<mg::Msg>& sends, const std::vector<mg::Msg>&) {
    const std::size_t key = static_cast<std::size_t>(l) * 2 + static_cast<std::size_t>(par);
    if (used_.size() <= key) used_.resize(key + 1, false);
    if (used_[key]) {
      std::vector<strata::Future<void>> credits;
      for (int peer : peers_of(sends)) credits.push_back(win_.wait(free_tag(l, par, peer), 1));
      for (auto& c : credits) c.get();
    }
    used_[key] = true;
    for (const mg::Msg& m : sends)
      sent_.push_back(win_.put_signal(m.peer, m.remote_off * sizeof(double), m.local, m.count * sizeof(double),
                                      data_tag(l, par, m.box)));
  }

  void wait_box(int l, int par, int box, const std::vector<mg::Msg>& recvs) {
    win_.wait(data_tag(l, par, box), recvs.size()).get();
  }

  // The send buffers may be reused once the puts completed; the senders may
  // write this parity's slots again once they get "free" from this rank.
  void end(int l, int par, const std::vector<mg::Msg>&, const std::vector<mg::Msg>& recvs) {
    for (auto& f : sent_) f.get();
    sent_.clear();
    for (auto& f : freed_) f.get();
    freed_.clear();
    for (int peer : peers_of(recvs)) freed_.push_back(win_.signal(peer, free_tag(l, par, rank())));
  }

  double sum(double v) { return reduce(v, strata::Op::sum); }
  double max(double v) { return reduce(v, strata::Op::max); }
  std::uint64_t sum_u64(std::uint64_t v) {
    std::uint64_t out = 0;
    comm_.allreduce(&v, &out, 1, strata::Datatype::uint64, strata::Op::sum).get();
    return out;
  }
  void allgather(const double* send, std::size_t count, double* recv) {
    comm_.allgather(send, count, recv, strata::Datatype::float64).get();
  }
  void barrier() { comm_.barrier().get(); }
  void finish() {
    for (auto& f : freed_) f.get();
    freed_.clear();
    // Collective: waits for this rank's own signals, then for every rank.
    win_.free();
  }

 private:
  static std::vector<int> peers_of(const std::vector<mg::Msg>& ms) {
    std::vector<int> p;
    for (const mg::Msg& m : ms)
      if (std::find(p.begin(), p.end(), m.peer) == p.end()) p.push_back(m.peer);
    return p;
  }
  double reduce(double v, strata::Op op) {
    double out = 0;
    comm_.allreduce(&v, &out, 1, strata::Datatype::float64, op).get();
    return out;
  }

  // --halo graph: one exchange's faces per neighbour (in receive-slot order)
  // and the alltoallv counts; built once per (level, parity): the messages of
  // an exchange never change.
  struct Layout {
    std::vector<std::vector<const mg::Msg*>> out, in;
    std::vector<std::size_t> sc, sd, rc, rd;
  };
  const Layout& layout(std::size_t key, const std::vector<mg::Msg>& sends, const std::vector<mg::Msg>& recvs) {
    if (layouts_.size() <= key) layouts_.resize(key + 1);
    std::unique_ptr<Layout>& slot = layouts_[key];
    if (!slot) {
      const auto n = static_cast<std::size_t>(size());
      auto by_peer = [n](const std::vector<mg::Msg>& ms, auto offset_of) {
        std::vector<std::vector<const mg::Msg*>> per(n);
        for (const mg::Msg& m : ms) per[static_cast<std::size_t>(m.peer)].push_back(&m);
        for (auto& v : per)
          std::sort(v.begin(), v.end(),
                    [&](const mg::Msg* a, const mg::Msg* b) { return offset_of(*a) < offset_of(*b); });
        return per;
      };
      auto lay = std::make_unique<Layout>();
      lay->out = by_peer(sends, [](const mg::Msg& m) { return m.remote_off; });
      lay->in = by_peer(recvs, [this](const mg::Msg& m) { return static_cast<std::size_t>(m.local - recv_base_); });
      lay->sc.assign(n, 0), lay->sd.assign(n, 0), lay->rc.assign(n, 0), lay->rd.assign(n, 0);
      std::size_t st = 0, rt = 0;
      for (std::size_t p = 0; p < n; ++p) {
        lay->sd[p] = st;
        for (const mg::Msg* m : lay->out[p]) lay->sc[p] += m->count;
        st += lay->sc[p];
        lay->rd[p] = rt;
        for (const mg::Msg* m : lay->in[p]) lay->rc[p] += m->count;
        rt += lay->rc[p];
      }
      sbuf_.resize(std::max({sbuf_.size(), st, std::size_t{1}}));
      rbuf_.resize(std::max({rbuf_.size(), rt, std::size_t{1}}));
      slot = std::move(lay);
    }
    return *slot;
  }

  strata::Communicator comm_;
  strata::Window win_;
  double* recv_base_ = nullptr;
  std::vector<std::unique_ptr<Layout>> layouts_;  // --halo graph, per (level, parity)
  std::vector<double> sbuf_, rbuf_;               // --halo graph
  std::vector<bool> used_;
  std::vector<strata::Future<void>> sent_, freed_;
};

}  // namespace

int main(int argc, char** argv) {
  return apps::strata_app_main<mg::Options>(
      "multigrid", argc, argv, mg::parse, [](strata::Engine& engine, const mg::Options& o) {
        StrataBackend b(engine.world());
        return mg::main_with(b, o, "strata", std::to_string(engine.hierarchy().num_hosts()));
      });
}
