#include "graph/builder.h"

#include <algorithm>

#include "core/check.h"

namespace lj {

const TypedShape& Val::type() const {
  LJ_CHECK(valid()) << "type() of an invalid Val";
  return b->graph().type(id);
}

void Builder::fail(Status s) {
  if (status_.ok() && !s.ok()) status_ = std::move(s);
}

Val Builder::add_input(const std::string& name, DType dtype, Shape shape, Role role) {
  if (g_->find_input(name) != kNoValue) {
    fail(invalid_argument("input '" + name + "' is declared twice"));
    return {};
  }
  for (const Dim& d : shape.dims()) {
    if (d.is_concrete() ? d.coef() < 0 : d.coef() <= 0) {
      fail(invalid_argument("input '" + name + "': shape " + shape.to_string() +
                            " has an invalid dim"));
      return {};
    }
  }
  // dtype and shape are attributes too, so verify() can re-infer the node (infer_input).
  Attrs attrs{
      {"name", name}, {"role", static_cast<int64_t>(role)}, {"dtype", dtype}, {"shape", shape}};
  const NodeId n = g_->add_node(Op::input, {}, std::move(attrs),
                                {TypedShape{dtype, std::move(shape)}}, scope_, phase_);
  return Val{g_->node(n).outputs[0], this};
}

void Builder::output(const std::string& name, Val v) {
  if (!v.valid()) return;  // the error is already recorded
  g_->add_output(name, v.id);
}

std::vector<Val> Builder::add(Op op, const std::vector<Val>& inputs, Attrs attrs) {
  const OpDef& def = op_def(op);
  std::vector<Val> invalid(static_cast<size_t>(std::max(def.num_outputs, 1)));
  for (const Val& v : inputs) {
    if (!v.valid()) return invalid;  // an earlier error is sticky
    LJ_CHECK(v.b == this) << "value from another builder passed to " << def.name;
  }
  if (def.num_inputs >= 0 && static_cast<int>(inputs.size()) != def.num_inputs) {
    fail(invalid_argument(std::string(def.name) + ": takes " + std::to_string(def.num_inputs) +
                          " inputs, got " + std::to_string(inputs.size())));
    return invalid;
  }
  std::vector<TypedShape> in;
  std::vector<ValueId> ids;
  for (const Val& v : inputs) {
    in.push_back(v.type());
    ids.push_back(v.id);
  }
  std::vector<TypedShape> out;
  Status s = def.infer(InferCtx{def, in, attrs}, &out);
  if (!s.ok()) {
    fail(scope_.empty() ? s : s.with_context(scope_));
    return invalid;
  }
  LJ_CHECK(def.num_outputs < 0 || static_cast<int>(out.size()) == def.num_outputs);
  const NodeId n =
      g_->add_node(op, std::move(ids), std::move(attrs), std::move(out), scope_, phase_);
  std::vector<Val> result;
  for (ValueId v : g_->node(n).outputs) result.push_back(Val{v, this});
  return result;
}

void Builder::push_scope(const std::string& name) {
  scope_marks_.push_back(scope_.size());
  if (!scope_.empty()) scope_ += '.';
  scope_ += name;
}

void Builder::pop_scope() {
  LJ_CHECK(!scope_marks_.empty()) << "pop_scope without push_scope";
  scope_.resize(scope_marks_.back());
  scope_marks_.pop_back();
}

}  // namespace lj
