// strata-trace-merge: merges per-rank DAG trace files (written with
// STRATA_TRACE=<prefix>: <prefix>.<rank>.json, one Chrome trace event object
// per line) into one Chrome trace JSON that Perfetto / chrome://tracing opens:
// one process per rank ("rank N"), one thread per executor thread.
//
// Usage: strata-trace-merge -o merged.json <prefix>.0.json <prefix>.1.json ...
//        strata-trace-merge -o merged.json --prefix <prefix>   (finds <prefix>.<r>.json for r = 0, 1, ...)
//
// Every input line is parsed as JSON (nlohmann-json); a line that is not an
// object is an error naming the file and line. Events are written one per line
// with their keys in input order.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "strata_cli.hpp"

int main(int argc, char** argv) {
  using Json = nlohmann::ordered_json;
  std::string out_path;
  std::string prefix;
  std::vector<std::string> inputs;
  CLI::App app{"Merges per-rank STRATA_TRACE files (<prefix>.<rank>.json) into one Chrome trace JSON",
               "strata-trace-merge"};
  app.add_option("-o,--output", out_path, "merged Chrome trace JSON to write")->required();
  app.add_option("--prefix", prefix, "find PREFIX.0.json, PREFIX.1.json, ... (stops at the first missing rank)");
  app.add_option("files", inputs, "per-rank trace files");
  strata::cli::parse(app, argc, argv);

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
  std::ofstream out(out_path);
  if (!out) {
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
  if (!out.flush()) {
    std::cerr << "strata-trace-merge: cannot write '" << out_path << "'\n";
    return 1;
  }
  std::cout << "strata-trace-merge: " << events << " events from " << inputs.size() << " files (" << ranks.size()
            << " ranks) -> " << out_path << "\n";
  return 0;
}
