#!/bin/sh
# pin.sh PROGRAM ARGS...: runs PROGRAM pinned to core (world rank % cores), the
# rank taken from Open MPI's or MPICH's environment. On the emulated cluster
# every virtual host sees every core, so an MPI's own binding (per host) puts
# the first rank of each host on core 0: rank 0 of host 0 and rank 0 of host 1
# then share one core (latencies quantized to the 4 ms scheduler tick). Launch
# with --bind-to none (Open MPI) / -bind-to none (MPICH) and this wrapper to
# place ranks like strata-run --bind core does.
r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${PMIX_RANK:-0}}}
n=$(nproc --all)
exec taskset -c $((r % n)) "$@"
