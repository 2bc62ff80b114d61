// strata: the umbrella header of the public API.
#pragma once

#include "strata/engine.hpp"
#include "strata/error.hpp"
#include "strata/future.hpp"
#include "strata/report.hpp"
#include "strata/types.hpp"
#include "strata/version.hpp"
#include "strata/window.hpp"
