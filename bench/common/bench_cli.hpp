// Options shared by strata-bench and the MPI baselines (strata-mpi-bench-*),
// declared once on a CLI::App (tools/common/strata_cli.hpp): what to
// measure (--coll, --sizes, --iters, --warmup, --off-cache, --check) and how
// to report it (--json, --format, -f).
#pragma once

#include <string>
#include <vector>

#include "common/bench_util.hpp"
#include "strata_cli.hpp"

namespace strata::bench {

/// The collectives measured by default, and those `--coll all` adds.
inline const std::vector<std::string>& default_colls() {
  static const std::vector<std::string> v{"bcast", "reduce", "allreduce", "allgather", "alltoall", "reduce_scatter"};
  return v;
}
inline const std::vector<std::string>& all_colls() {
  static const std::vector<std::string> v{"bcast",          "reduce", "allreduce", "allgather", "alltoall",
                                          "reduce_scatter", "gather", "scatter",   "barrier"};
  return v;
}

/// "a,b,c" -> {"a", "b", "c"}; "all" -> all_colls().
inline std::vector<std::string> split_colls(const std::string& v) {
  if (v == "all") return all_colls();
  std::vector<std::string> out;
  for (std::size_t s = 0; s <= v.size();) {
    const std::size_t c = v.find(',', s);
    out.push_back(v.substr(s, c == std::string::npos ? std::string::npos : c - s));
    if (c == std::string::npos) break;
    s = c + 1;
  }
  return out;
}

/// @brief The measuring and reporting options both benchmarks share.
struct CommonOptions {
  std::vector<std::size_t> sizes;  ///< --sizes (empty: the tool's default)
  int iters = 0;                   ///< --iters (0: sized to the message, iterations_for())
  int warmup = -1;                 ///< --warmup (-1: max(2, iters / 10))
  bool off_cache = false;          ///< --off-cache
  bool check = false;              ///< --check
  std::string json;                ///< --json FILE (rank 0)
  std::string format = "table";    ///< --format table|json|osu|nccl (stdout of rank 0)
  bool full = false;               ///< -f, --full: osu format with Min/Max Latency and Iterations
};

/// Adds --sizes, --iters, --warmup, --off-cache, --check, --json, --format and -f to @p app, stored in @p o.
inline void add_common_options(CLI::App& app, CommonOptions& o) {
  app.add_option_function<std::string>(
         "--sizes", [&o](const std::string& v) { o.sizes = parse_sizes(v); },
         "LO:HI (powers of two, e.g. 8:64M), a list 1K,3,5M, or one size")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              parse_sizes(v);
              return {};
            } catch (const std::exception& e) {
              return std::string("expects LO:HI, a list or one size (") + e.what() + ")";
            }
          },
          "SPEC"));
  app.add_option("--iters", o.iters, "repetitions per size (default: sized to the message)")
      ->check(cli::positive_integer());
  app.add_option("--warmup", o.warmup, "untimed repetitions first (default: max(2, iters/10))")
      ->check(cli::integer_at_least(0));
  app.add_flag("--off-cache", o.off_cache, "rotate buffers through a region larger than the last-level cache");
  app.add_flag("--check", o.check, "verify the results");
  app.add_option("--json", o.json, "write the records as JSON to FILE (rank 0)");
  app.add_option("--format", o.format,
                 "stdout of rank 0: table (default), json, osu (OSU micro-benchmarks columns) or nccl "
                 "(nccl-tests columns: algbw, busbw)")
      ->check(cli::one_of({"table", "json", "osu", "nccl"}));
  app.add_flag("-f,--full", o.full, "--format osu: add Min Latency, Max Latency and Iterations (OSU's -f)");
}

/// Prints @p recs to stdout in @p o.format (table, json, osu, nccl).
inline void print_records(const CommonOptions& o, const std::vector<Record>& recs) {
  if (o.format == "osu") {
    print_osu(stdout, recs, o.full);
  } else if (o.format == "nccl") {
    print_nccl(stdout, recs);
  } else if (o.format == "json") {
    write_json(stdout, recs);
  } else {
    print_header(stdout);
    for (const Record& r : recs) print_record(stdout, r);
  }
  std::fflush(stdout);
}

/// Writes @p recs to the --json file, if any; false (after a message) when it cannot.
inline bool write_json_file(const CommonOptions& o, const std::vector<Record>& recs, const char* tool) {
  if (o.json.empty()) return true;
  std::FILE* f = std::fopen(o.json.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "%s: cannot write --json %s\n", tool, o.json.c_str());
    return false;
  }
  write_json(f, recs);
  return std::fclose(f) == 0;
}

}  // namespace strata::bench
