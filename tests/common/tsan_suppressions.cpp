// ThreadSanitizer suppressions linked into every test binary (tests/CMakeLists.txt). Debian's libtbb is not built
// with TSan, so the construction, hand-off and destruction of oneTBB's own task
// objects (enqueue_task / function_task, allocated from its uninstrumented
// small-object pool) are invisible to it; reports whose stacks run through
// those task wrappers are false positives. strata's own hand-offs are
// annotated with __tsan_release/__tsan_acquire instead.
//
// Only the task wrappers' own names: a pattern matches any frame of any stack
// in a report, including the stack that created the thread, and every TBB
// worker is created from inside task_arena.h (enqueue), so header-file
// patterns would silence every race that involves a TBB worker.
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() {
  // shm_rank's mapped-regions scenario orders its accesses across processes:
  // a peer's ring get is answered by this rank's progress thread (it reads
  // the source region), the peer completes it, and only after a bootstrap
  // barrier (sockets) does this rank's main thread rewrite the region for
  // the next size. TSan sees no edge between the two threads of this process
  // (the edge runs through another process) and reports the rewrite.
  return "race:tbb::detail::d1::enqueue_task\n"
         "race:tbb::detail::d2::function_task\n"
         "race:mapped_regions_scenario\n";
}
// The suppressions match the stack of the task's construction, the earlier
// access of such a race; with the default history a busy thread's older stacks
// are lost ("failed to restore the stack") and the report escapes them.
// TSAN_OPTIONS still overrides this.
extern "C" const char* __tsan_default_options() { return "history_size=7"; }
#endif
