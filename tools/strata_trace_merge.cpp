// strata-trace-merge: merges per-rank DAG trace files (written with
// STRATA_TRACE=<prefix>: <prefix>.<rank>.json, one Chrome trace event object
// per line) into one Chrome trace JSON that Perfetto / chrome://tracing opens:
// one process per rank ("rank N"), one thread per executor thread.
//
// Usage: strata-trace-merge -o merged.json <prefix>.0.json <prefix>.1.json ...
//        strata-trace-merge -o merged.json --prefix <prefix>   (finds <prefix>.<r>.json for r = 0, 1, ...)
//
//        strata-trace-merge --bytes --prefix <prefix>   (and/or -o: both)
//
// Every input line is parsed as JSON (nlohmann-json); a line that is not an
// object is an error naming the file and line. Events are written one per line
// with their keys in input order. --bytes prints the bytes the DAG nodes moved
// per rank, node kind and peer (the trace's "bytes" / "peer" arguments: copy,
// reduce, put, put_with_signal, get, read_peer, write_peer), one line each:
//   bytes rank R KIND peer P|- B nodes N
// (peer: the target of a put, the owner read by get / read_peer or by a copy
// through a mapping; - for a local copy or reduce).
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "strata_cli.hpp"

int main(int argc, char** argv) {
  using Json = nlohmann::ordered_json;
  std::string out_path;
  std::string prefix;
  std::vector<std::string> inputs;
  CLI::App app{"Merges per-rank STRATA_TRACE files (<prefix>.<rank>.json) into one Chrome trace JSON",
               "strata-trace-merge"};
  bool bytes = false;
  app.add_option("-o,--output", out_path, "merged Chrome trace JSON to write (needed unless --bytes)");
  app.add_flag("--bytes", bytes, "print the bytes the nodes moved per rank, node kind and peer");
  app.add_option("--prefix", prefix, "find PREFIX.0.json, PREFIX.1.json, ... (stops at the first missing rank)");
  app.add_option("files", inputs, "per-rank trace files");
  strata::cli::parse(app, argc, argv);
  if (out_path.empty() && !bytes) strata::cli::fail("strata-trace-merge", "-o,--output is required (or --bytes)");
  // --bytes: (rank, kind, peer) -> (bytes, nodes).
  std::map<std::tuple<long long, std::string, long long>, std::pair<std::uint64_t, std::uint64_t>> moved;

  if (!prefix.empty()) {
    for (int r = 0;; ++r) {
      const std::string f = prefix + "." + std::to_string(r) + ".json";
      if (!std::ifstream(f)) break;
      inputs.push_back(f);
    }
  }
  if (inputs.empty())
    strata::cli::fail("strata-trace-merge",
                      "no input files" + (prefix.empty() ? std::string() : " for --prefix '" + prefix + "'"));
  std::ofstream out;
  if (!out_path.empty()) out.open(out_path);
  if (!out_path.empty() && !out) {
    std::cerr << "strata-trace-merge: cannot write '" << out_path << "'\n";
    return 1;
  }
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  std::set<long long> ranks;
  std::size_t events = 0;
  for (const std::string& path : inputs) {
    std::ifstream in(path);
    if (!in) {
      std::cerr << "strata-trace-merge: cannot read '" << path << "'\n";
      return 1;
    }
    std::string line;
    std::size_t lineno = 0;
    while (std::getline(in, line)) {
      ++lineno;
      if (line.empty()) continue;
      Json event = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!event.is_object()) {
        std::cerr << "strata-trace-merge: " << path << ":" << lineno << ": not a trace event object\n";
        return 1;
      }
      const auto pid = event.find("pid");
      if (pid != event.end() && pid->is_number_integer() && pid->get<long long>() >= 0)
        ranks.insert(pid->get<long long>());
      const auto args = event.find("args");
      if (bytes && args != event.end() && args->is_object() && args->contains("bytes") && pid != event.end()) {
        const std::string name = event.value("name", std::string());
        const std::string kind = name.substr(name.rfind(' ') + 1);
        const long long peer = args->value("peer", -1LL);
        auto& m = moved[{pid->get<long long>(), kind, peer}];
        m.first += args->value("bytes", std::uint64_t{0});
        ++m.second;
      }
      out << (first ? "" : ",\n") << event.dump(-1, ' ', false, Json::error_handler_t::replace);
      first = false;
      ++events;
    }
  }
  for (long long r : ranks) {
    const Json meta = {
        {"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"args", {{"name", "rank " + std::to_string(r)}}}};
    out << (first ? "" : ",\n") << meta.dump();
    first = false;
  }
  out << "\n]}\n";
  if (!out_path.empty() && !out.flush()) {
    std::cerr << "strata-trace-merge: cannot write '" << out_path << "'\n";
    return 1;
  }
  for (const auto& [k, v] : moved)
    std::cout << "bytes rank " << std::get<0>(k) << " " << std::get<1>(k) << " peer "
              << (std::get<2>(k) < 0 ? std::string("-") : std::to_string(std::get<2>(k))) << " " << v.first
              << " B nodes " << v.second << "\n";
  std::cout << "strata-trace-merge: " << events << " events from " << inputs.size() << " files (" << ranks.size()
            << " ranks)" << (out_path.empty() ? std::string() : " -> " + out_path) << "\n";
  return 0;
}
