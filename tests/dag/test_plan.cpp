// The IR: builder, single-slice and cross-slice validation, DOT, reduce kernels.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "strata/dag/plan.hpp"

using namespace strata::dag;
using strata::Errc;

namespace {
std::string build_error(PlanBuilder& b) {
  std::shared_ptr<const Plan> p;
  strata::Status st = b.try_build(&p);
  EXPECT_FALSE(st.is_ok());
  return st.message();
}
}  // namespace

TEST(Plan, BuildsCsrSuccessorsAndSlotTable) {
  PlanBuilder b("t", 0, 2);
  b.input(0, 16).output(0, 16).peer_buffer(1, 0, 16);
  NodeId c = b.copy(in(0, 0, 16), out(0, 0, 16));
  NodeId p = b.put_with_signal(1, out(0, 0, 16), peer(1, 0, 0, 16), 3, {c});
  NodeId w = b.wait(5, 2, {c});
  NodeId j = b.nop({p, w});
  auto plan = b.build();
  EXPECT_EQ(plan->size(), 4u);
  EXPECT_EQ(plan->succ_end(c) - plan->succ_begin(c), 2);
  EXPECT_EQ(plan->wait_node(5), w);
  EXPECT_EQ(plan->wait_node(3), kNoNode);
  EXPECT_TRUE(plan->involves(1));
  EXPECT_FALSE(plan->involves(0));
  EXPECT_EQ(*plan->succ_begin(p), j);
}

TEST(Plan, ValidationErrorsNameTheNode) {
  {
    PlanBuilder b("cyc", 0, 1);
    NodeId a = b.nop();
    NodeId c = b.nop({a});
    b.depend(a, c);
    EXPECT_NE(build_error(b).find("cycle"), std::string::npos);
  }
  {
    PlanBuilder b("oob", 0, 1);
    b.input(0, 8).output(0, 8);
    b.copy(in(0, 4, 8), out(0, 0, 8));
    std::string e = build_error(b);
    EXPECT_NE(e.find("node 0 (copy)"), std::string::npos) << e;
    EXPECT_NE(e.find("exceeds"), std::string::npos) << e;
  }
  {
    PlanBuilder b("undeclared", 0, 1);
    b.output(0, 8);
    b.copy(scratch(3, 0, 8), out(0, 0, 8));
    EXPECT_NE(build_error(b).find("undeclared"), std::string::npos);
  }
  {
    PlanBuilder b("cover", 0, 1);
    b.input(0, 8).output(0, 16);
    b.copy(in(0, 0, 8), out(0, 0, 8));
    EXPECT_NE(build_error(b).find("[8, 16)"), std::string::npos);
  }
  {
    PlanBuilder b("peer", 0, 2);
    b.input(0, 8).peer_buffer(1, 0, 8);
    b.put(3, in(0, 0, 8), peer(1, 0, 0, 8));
    EXPECT_NE(build_error(b).find("peer 3 outside"), std::string::npos);
  }
  {
    PlanBuilder b("bitwise", 0, 1);
    b.scratch(0, 8);
    b.reduce(scratch(0, 0, 8), scratch(0, 0, 8), scratch(0, 0, 8), ReduceOp::bxor, DataType::f64);
    std::shared_ptr<const Plan> p;
    EXPECT_EQ(b.try_build(&p).code(), Errc::unsupported);
  }
  {
    PlanBuilder b("dup", 0, 1);
    b.wait(1, 1);
    b.wait(1, 1);
    EXPECT_NE(build_error(b).find("already waited"), std::string::npos);
  }
  {
    PlanBuilder b("input-write", 0, 1);
    b.input(0, 8).scratch(0, 8);
    b.copy(scratch(0, 0, 8), in(0, 0, 8));
    EXPECT_NE(build_error(b).find("writes to user input"), std::string::npos);
  }
  PlanBuilder bad("rank", 2, 2);
  EXPECT_THROW(bad.build(), strata::Error);
}

TEST(Plan, CrossSliceValidationMatchesSignalsToWaits) {
  PlanBuilder b0("x", 0, 2), b1("x", 1, 2);
  b0.signal(1, 7);
  b0.signal(1, 7);
  b1.wait(7, 2);
  auto p0 = b0.build(), p1 = b1.build();
  EXPECT_TRUE(validate(std::vector<const Plan*>{p0.get(), p1.get()}).is_ok());

  PlanBuilder c1("x", 1, 2);
  c1.wait(7, 3);
  auto q1 = c1.build();
  strata::Status st = validate(std::vector<const Plan*>{p0.get(), q1.get()});
  EXPECT_NE(st.message().find("waits for 3 signals"), std::string::npos) << st.message();

  PlanBuilder d1("x", 1, 2);
  d1.wait(8, 1);
  auto r1 = d1.build();
  st = validate(std::vector<const Plan*>{p0.get(), r1.get()});
  EXPECT_NE(st.message().find("no wait node"), std::string::npos) << st.message();
  EXPECT_FALSE(validate(std::vector<const Plan*>{p1.get(), p0.get()}).is_ok());  // wrong order of slices
}

TEST(Plan, DotExportShowsNodesAndCrossRankEdges) {
  PlanBuilder b0("bc", 0, 2), b1("bc", 1, 2);
  b0.input(0, 4).peer_buffer(1, 0, 4);
  b0.label(b0.put_with_signal(1, in(0, 0, 4), peer(1, 0, 0, 4), 0), "frag0");
  b1.output(0, 4);
  Region g = out(0, 0, 4);
  b1.wait(0, 1, {}, &g);
  auto p0 = b0.build(), p1 = b1.build();
  const std::string one = to_dot(*p0);
  EXPECT_NE(one.find("digraph"), std::string::npos);
  EXPECT_NE(one.find("frag0"), std::string::npos);
  const std::string all = to_dot(std::vector<const Plan*>{p0.get(), p1.get()});
  EXPECT_NE(all.find("cluster_r1"), std::string::npos);
  EXPECT_NE(all.find("r0_0 -> r1_0 [style=dashed"), std::string::npos) << all;
}

TEST(Reduce, BuiltinKernelsCoverTypesAndOps) {
  const DataType types[] = {DataType::i8,  DataType::i16, DataType::i32, DataType::i64, DataType::u8,
                            DataType::u16, DataType::u32, DataType::u64, DataType::f32, DataType::f64};
  const ReduceOp ops[] = {ReduceOp::sum,  ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                          ReduceOp::band, ReduceOp::bor,  ReduceOp::bxor};
  for (DataType t : types)
    for (ReduceOp op : ops) {
      const bool fp = t == DataType::f32 || t == DataType::f64;
      const bool bitwise = op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
      EXPECT_EQ(reduce_kernel(op, t) == nullptr, fp && bitwise) << to_string(op) << "/" << to_string(t);
    }
  std::int32_t a[3] = {1, -5, 7}, b[3] = {2, 3, -9}, d[3];
  reduce_kernel(ReduceOp::sum, DataType::i32)(a, b, d, 3);
  EXPECT_EQ(d[0], 3);
  EXPECT_EQ(d[2], -2);
  reduce_kernel(ReduceOp::min, DataType::i32)(a, b, d, 3);
  EXPECT_EQ(d[1], -5);
  std::uint8_t x[2] = {0xF0, 0x0F}, y[2] = {0xFF, 0xFF};
  reduce_kernel(ReduceOp::bxor, DataType::u8)(x, y, x, 2);  // in place
  EXPECT_EQ(x[0], 0x0F);
  std::int8_t big[1] = {std::numeric_limits<std::int8_t>::max()}, one[1] = {1};
  reduce_kernel(ReduceOp::sum, DataType::i8)(big, one, big, 1);  // wraps, no UB
  EXPECT_EQ(big[0], std::numeric_limits<std::int8_t>::min());
  double p[2] = {1.5, 2.0}, q[2] = {2.0, 0.5};
  reduce_kernel(ReduceOp::prod, DataType::f64)(p, q, p, 2);
  EXPECT_DOUBLE_EQ(p[0], 3.0);
  EXPECT_DOUBLE_EQ(p[1], 1.0);
  EXPECT_EQ(datatype_size(DataType::u16), 2u);
}
