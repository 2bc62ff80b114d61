// strata-trace-merge: merges per-rank DAG trace files (written with
// STRATA_TRACE=<prefix>: <prefix>.<rank>.json, one Chrome trace event object
// per line) into one Chrome trace JSON that Perfetto / chrome://tracing opens:
// one process per rank ("rank N"), one thread per executor thread.
//
// Usage: strata-trace-merge -o merged.json <prefix>.0.json <prefix>.1.json ...
//        strata-trace-merge -o merged.json --prefix <prefix>   (finds <prefix>.<r>.json for r = 0, 1, ...)
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

namespace {

int usage() {
  std::cerr << "usage: strata-trace-merge -o OUT.json (--prefix PREFIX | FILE...)\n"
               "  merges per-rank STRATA_TRACE files into one Chrome trace JSON\n";
  return 2;
}

// Extracts the integer after "\"pid\":" (the rank) from one event line; -1 if absent.
long pid_of(const std::string& line) {
  const auto at = line.find("\"pid\":");
  if (at == std::string::npos) return -1;
  try {
    return std::stol(line.substr(at + 6));
  } catch (...) {
    return -1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_path;
  std::string prefix;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "-o" || a == "--prefix") && i + 1 == argc) {
      std::cerr << "strata-trace-merge: option '" << a << "' needs a value\n";
      return usage();
    }
    if (a == "-o" && i + 1 < argc) {
      out_path = argv[++i];
    } else if (a == "--prefix" && i + 1 < argc) {
      prefix = argv[++i];
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "strata-trace-merge: unknown option '" << a << "'\n";
      return usage();
    } else {
      inputs.push_back(a);
    }
  }
  if (out_path.empty()) {
    std::cerr << "strata-trace-merge: missing -o OUT.json\n";
    return usage();
  }
  if (!prefix.empty()) {
    for (int r = 0;; ++r) {
      const std::string f = prefix + "." + std::to_string(r) + ".json";
      if (!std::ifstream(f)) break;
      inputs.push_back(f);
    }
  }
  if (inputs.empty()) {
    std::cerr << "strata-trace-merge: no input files" << (prefix.empty() ? "" : " for prefix '" + prefix + "'") << "\n";
    return usage();
  }
  std::ofstream out(out_path);
  if (!out) {
    std::cerr << "strata-trace-merge: cannot write '" << out_path << "'\n";
    return 1;
  }
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  std::set<long> ranks;
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
      if (line.front() != '{' || line.back() != '}') {
        std::cerr << "strata-trace-merge: " << path << ":" << lineno << ": not a trace event object\n";
        return 1;
      }
      const long pid = pid_of(line);
      if (pid >= 0) ranks.insert(pid);
      out << (first ? "" : ",\n") << line;
      first = false;
      ++events;
    }
  }
  for (long r : ranks) {
    out << (first ? "" : ",\n") << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << r
        << ",\"args\":{\"name\":\"rank " << r << "\"}}";
    first = false;
  }
  out << "\n]}\n";
  std::cout << "strata-trace-merge: " << events << " events from " << inputs.size() << " files (" << ranks.size()
            << " ranks) -> " << out_path << "\n";
  return 0;
}
