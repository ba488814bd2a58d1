// Pointwise fusion: groups maximal DAGs of fusible elementwise nodes (op flag kFusible, category
// elementwise: the unary and binary math ops of codegen/kernel_ir.h), optionally closed by ONE
// reduction over the last axis (sum / mean / max, keepdim or not), into one fused_pointwise node
// each. The node carries its kernel as codegen kernel IR text (attribute `kernel`) with the loop
// shape symbolic, so one kernel serves every B and T.
//
// Grouping, in topological order, greedy: a node joins (and merges) the open groups of its
// producers when
//  - it computes in the group's dtype (f64, or f32 for f32 and bf16 values: the kernel loads
//    and stores bf16 and computes in f32, codegen/kernel_ir.h; a cast between f32 and bf16 is a
//    member, and every bf16 member's result is rounded to bf16 in the kernel as the eager kernel
//    rounds it, so a fused group gives the eager bits), the same phase, and its output shape is
//    the group's new loop shape (every member's shape broadcasts to it);
//  - no node outside the group that comes before it reads a member (the fused node takes the
//    position of its last member, so every outside reader must come after; this also rules out
//    cycles through an unfused node);
//  - when the loop grows (a (B, T, 1) chain feeding a (B, T, C) op), every member is read only
//    inside the group: a group output always has the loop shape.
// A reduction joins only as the last member: its input is a member of the loop shape, and the
// group closes. `constant` nodes and `expand`s of values outside the group are not members: each
// group reads them as a literal or as a broadcast load (shared constants stay shared; dce drops
// what is no longer read), except an expand whose input is fused into another group, which is
// loaded expanded (that input may exist only inside the other group's kernel). `expand` of a member
// is a member (a broadcast in the loop). A node that is not kFusible (matmul, sdpa, gather,
// collectives, opaque ops) never joins, so graph breaks are respected. Groups of one node stay as
// they were.
//
// Outputs of a group: its members read outside the group or that are graph outputs (value ids are
// kept, so nothing else is rewritten), then the reduction. The fused node takes the phase and
// scope of the group's last member.
//
// Before: autodiff (fused_pointwise is not differentiable), remat, cse and dce (so shared
// subexpressions are shared before they are duplicated into groups). After: dce (constants and
// expands the groups inlined).
#pragma once

#include <cstdint>

#include "passes/pass.h"

namespace lj {

class PointwiseFusionPass : public Pass {
 public:
  const char* name() const override { return "pointwise_fusion"; }
  StatusOr<bool> run(Graph& g) override;

  // Of the last run: fused nodes made, and the nodes they replaced.
  int64_t fused_groups() const { return fused_groups_; }
  int64_t fused_members() const { return fused_members_; }

 private:
  int64_t fused_groups_ = 0;
  int64_t fused_members_ = 0;
};

}  // namespace lj
