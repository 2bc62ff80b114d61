// Hierarchy: the pure part of the topology (no I/O, no hwloc).
#include <algorithm>
#include <cstdint>
#include <map>
#include <sstream>
#include <utility>

#include "strata/transport/topology.hpp"

namespace strata {
namespace {

constexpr std::uint32_t kPlaceMagic = 0x50525453u;  // "STRP" little-endian
constexpr std::uint32_t kPlaceVersion = 1u;

void put_u32(std::byte* out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffu);
}

std::uint32_t get_u32(const std::byte* in) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(std::to_integer<unsigned>(in[i])) << (8 * i);
  return v;
}

// Two's-complement round trip of an int through 32 bits without
// implementation-defined conversions.
std::uint32_t to_u32(int v) { return v >= 0 ? static_cast<std::uint32_t>(v) : ~static_cast<std::uint32_t>(-(v + 1)); }
int from_u32(std::uint32_t v) { return (v & 0x80000000u) == 0 ? static_cast<int>(v) : -static_cast<int>(~v) - 1; }

// "0-3,8,10-11" from ascending ranks.
std::string ranges(const std::vector<int>& ranks) {
  std::ostringstream os;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i != 0) os << ',';
    os << ranks[i];
    if (j > i) os << '-' << ranks[j];
    i = j + 1;
  }
  return os.str();
}

}  // namespace

const char* level_name(Level level) noexcept {
  switch (level) {
    case Level::host:
      return "host";
    case Level::package:
      return "package";
    case Level::numa:
      return "numa";
    case Level::core:
      return "core";
  }
  return "unknown";
}

Hierarchy::Hierarchy(std::vector<RankPlace> places) : places_(std::move(places)) {
  const int n = size();
  for (int r = 0; r < n; ++r) {
    const RankPlace& p = places_[static_cast<std::size_t>(r)];
    const auto bad = [r](const std::string& what) {
      throw Error(Errc::invalid_argument,
                  "Hierarchy: places[" + std::to_string(r) + "] (rank " + std::to_string(r) + "): " + what);
    };
    if (p.rank != r) bad("rank field is " + std::to_string(p.rank) + ", expected " + std::to_string(r));
    if (p.host < 0) bad("host is " + std::to_string(p.host) + ", must be >= 0");
    if (p.package < 0) bad("package is " + std::to_string(p.package) + ", must be >= 0");
    if (p.numa < 0) bad("numa is " + std::to_string(p.numa) + ", must be >= 0");
    if (p.core < 0) bad("core is " + std::to_string(p.core) + ", must be >= 0");
    if (p.pu < -1) bad("pu is " + std::to_string(p.pu) + ", must be >= -1");
  }

  // Group ranks by key per level; ranks are visited ascending, so every group
  // is ascending and groups are created in the order of their leaders.
  const auto build = [this, n](auto key_of) {
    Table t;
    t.group_of.assign(static_cast<std::size_t>(n), -1);
    std::map<decltype(key_of(places_[0])), int> index;
    for (int r = 0; r < n; ++r) {
      const auto key = key_of(places_[static_cast<std::size_t>(r)]);
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, static_cast<int>(t.groups.size())).first;
        t.groups.emplace_back();
      }
      t.groups[static_cast<std::size_t>(it->second)].push_back(r);
      t.group_of[static_cast<std::size_t>(r)] = it->second;
    }
    return t;
  };
  if (n == 0) return;
  tables_[0] = build([](const RankPlace& p) { return p.host; });
  tables_[1] = build([](const RankPlace& p) { return std::make_pair(p.host, p.package); });
  tables_[2] = build([](const RankPlace& p) { return std::make_pair(p.host, p.numa); });
  for (const auto& g : tables_[0].groups) host_leaders_.push_back(g.front());
}

void Hierarchy::check_rank(int rank, const char* what) const {
  if (rank < 0 || rank >= size()) {
    throw Error(Errc::unknown_peer, std::string("Hierarchy::") + what + ": rank " + std::to_string(rank) +
                                        " outside [0, " + std::to_string(size()) + ")");
  }
}

const Hierarchy::Table& Hierarchy::table(Level level) const {
  switch (level) {
    case Level::host:
      return tables_[0];
    case Level::package:
      return tables_[1];
    case Level::numa:
      return tables_[2];
    case Level::core:
      break;
  }
  throw Error(Errc::invalid_argument,
              "Hierarchy: level " + std::to_string(static_cast<int>(level)) + " has no group table");
}

const RankPlace& Hierarchy::place(int rank) const {
  check_rank(rank, "place");
  return places_[static_cast<std::size_t>(rank)];
}

int Hierarchy::num_groups(Level level) const {
  if (level == Level::core) return size();
  return static_cast<int>(table(level).groups.size());
}

int Hierarchy::leader(int rank, Level level) const {
  check_rank(rank, "leader");
  if (level == Level::core) return rank;
  const Table& t = table(level);
  return t.groups[static_cast<std::size_t>(t.group_of[static_cast<std::size_t>(rank)])].front();
}

std::vector<int> Hierarchy::group(int rank, Level level) const {
  check_rank(rank, "group");
  if (level == Level::core) return {rank};
  const Table& t = table(level);
  return t.groups[static_cast<std::size_t>(t.group_of[static_cast<std::size_t>(rank)])];
}

std::vector<int> Hierarchy::leaders(Level level) const {
  std::vector<int> out;
  if (level == Level::core) {
    for (int r = 0; r < size(); ++r) out.push_back(r);
    return out;
  }
  for (const auto& g : table(level).groups) out.push_back(g.front());
  return out;  // groups are created in leader order, so ascending
}

std::vector<int> Hierarchy::leaders_on_host(int rank, Level level) const {
  check_rank(rank, "leaders_on_host");
  const int host = places_[static_cast<std::size_t>(rank)].host;
  std::vector<int> out;
  if (level == Level::host) return {leader(rank, Level::host)};
  if (level == Level::core) return group(rank, Level::host);
  for (const auto& g : table(level).groups) {
    if (places_[static_cast<std::size_t>(g.front())].host == host) out.push_back(g.front());
  }
  return out;
}

std::string Hierarchy::describe() const {
  std::ostringstream os;
  if (places_.empty()) return "hierarchy: no ranks\n";
  os << "hierarchy: " << size() << (size() == 1 ? " rank" : " ranks") << " on " << num_hosts()
     << (num_hosts() == 1 ? " host" : " hosts") << ", " << num_groups(Level::package) << " package(s), "
     << num_groups(Level::numa) << " NUMA region(s) with ranks\n";
  // host -> package -> numa -> core -> ranks, all ordered by index.
  std::map<int, std::map<int, std::map<int, std::map<int, std::vector<int>>>>> tree;
  for (const RankPlace& p : places_) tree[p.host][p.package][p.numa][p.core].push_back(p.rank);
  const auto lead = [](int l) { return " (leader " + std::to_string(l) + ")"; };
  const auto ranks_of = [](const std::vector<int>& rs) { return (rs.size() == 1 ? "rank " : "ranks ") + ranges(rs); };
  for (const auto& [host, packages] : tree) {
    std::vector<int> all;
    for (const auto& [pk, numas] : packages)
      for (const auto& [nm, cores] : numas)
        for (const auto& [c, rs] : cores) all.insert(all.end(), rs.begin(), rs.end());
    std::sort(all.begin(), all.end());
    const int first = all.front();
    os << "host " << host << ": " << ranks_of(all) << lead(first) << '\n';
    for (const auto& [pk, numas] : packages) {
      std::vector<int> pranks;
      for (const auto& [nm, cores] : numas)
        for (const auto& [c, rs] : cores) pranks.insert(pranks.end(), rs.begin(), rs.end());
      std::sort(pranks.begin(), pranks.end());
      os << "  package " << pk << ": " << ranks_of(pranks) << lead(pranks.front()) << '\n';
      for (const auto& [nm, cores] : numas) {
        // A NUMA group spans the whole host; list its leader from the table.
        const int nl = leader(cores.begin()->second.front(), Level::numa);
        std::vector<int> nranks;
        for (const auto& [c, rs] : cores) nranks.insert(nranks.end(), rs.begin(), rs.end());
        std::sort(nranks.begin(), nranks.end());
        os << "    numa " << nm << ": " << ranks_of(nranks) << lead(nl) << '\n';
        for (const auto& [c, rs] : cores) {
          os << "      core " << c << ": " << ranks_of(rs);
          if (rs.size() > 1) os << " (oversubscribed)";
          os << '\n';
        }
      }
    }
  }
  return os.str();
}

std::vector<std::byte> Hierarchy::encode(const RankPlace& p) {
  std::vector<std::byte> out(kEncodedSize);
  put_u32(&out[0], kPlaceMagic);
  put_u32(&out[4], kPlaceVersion);
  put_u32(&out[8], to_u32(p.rank));
  put_u32(&out[12], to_u32(p.host));
  put_u32(&out[16], to_u32(p.package));
  put_u32(&out[20], to_u32(p.numa));
  put_u32(&out[24], to_u32(p.core));
  put_u32(&out[28], to_u32(p.pu));
  return out;
}

RankPlace Hierarchy::decode(const std::byte* data, std::size_t len) {
  if (data == nullptr || len != kEncodedSize) {
    throw Error(Errc::invalid_argument, "Hierarchy::decode: len is " + std::to_string(len) + " bytes, expected " +
                                            std::to_string(kEncodedSize) + (data == nullptr ? " (data is null)" : ""));
  }
  if (get_u32(data) != kPlaceMagic || get_u32(data + 4) != kPlaceVersion) {
    throw Error(Errc::invalid_argument, "Hierarchy::decode: data is not an encoded RankPlace (bad magic/version)");
  }
  RankPlace p;
  p.rank = from_u32(get_u32(data + 8));
  p.host = from_u32(get_u32(data + 12));
  p.package = from_u32(get_u32(data + 16));
  p.numa = from_u32(get_u32(data + 20));
  p.core = from_u32(get_u32(data + 24));
  p.pu = from_u32(get_u32(data + 28));
  return p;
}

}  // namespace strata
