// Hang forensics (docs/reliability.md, "Hang reports"): what each rank's
// pending calls wait for, and one short summary merged from every rank's.
#pragma once

#include <string>
#include <vector>

namespace strata::report {

/// @brief Merges the reports of several ranks (the text of Engine::pending_report
/// of each, in any order) into a short summary, one line per call that some
/// rank waits in, for example
///
///     communicator 2 call #41 allreduce 8 B: ranks 0-2 wait (node 4 wait(slot 3): 1 signal(s)
///     missing, from ranks among {3}); rank 3 never posted it (its next call there is #41)
///
/// and "mismatch" lines where ranks run different collectives or sizes at the
/// same sequence number of a communicator. Ranks with no report are named.
/// @param reports the reports (lines starting "strata-report rank R ...")
/// @param nranks the job's size (0: unknown; then absent ranks are not named)
std::string merge(const std::vector<std::string>& reports, int nranks = 0);

/// @brief "0-2,5" for {0, 1, 2, 5}.
std::string rank_list(std::vector<int> ranks);

}  // namespace strata::report
