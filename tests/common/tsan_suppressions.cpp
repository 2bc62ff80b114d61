// ThreadSanitizer suppressions linked into every test binary (tests/CMakeLists.txt). Debian's libtbb is not built
// with TSan, so the construction, hand-off and destruction of oneTBB's own task
// objects (enqueue_task / function_task, allocated from its uninstrumented
// small-object pool) are invisible to it; reports whose stacks run through
// those task wrappers are false positives. strata's own hand-offs are
// annotated with __tsan_release/__tsan_acquire instead.
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() {
  return "race:tbb::detail::d1::enqueue_task\n"
         "race:tbb::detail::d2::function_task\n"
         "race:oneapi/tbb/task_arena.h\n"
         "race:oneapi/tbb/task_group.h\n";
}
#endif
