#include "models/llama.h"

#include "models/moe.h"

namespace lj {
namespace {

const Dim kB = Dim::sym('B');
const Dim kT = Dim::sym('T');

// HF LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * weight, in the compute dtype (f32 on the CPU).
Val rms_norm(Val x, Val w, double eps) {
  Val var = mean(square(x), {-1}, /*keepdim=*/true);
  return x * rsqrt(var + eps) * w;
}

// x (B, T, C_in) @ w (C_out, C_in)^T -> (B, T, C_out)
Val linear(Val x, Val w) {
  return matmul(x, w, false, true);
}

// HF rotate_half on the last dim: cat(-x2, x1).
Val rotate_half(Val x, int64_t d) {
  Val x1 = slice(x, -1, 0, d / 2);
  Val x2 = slice(x, -1, d / 2, d);
  return concat({-x2, x1}, -1);
}

// x (B, H, T, D); cos, sin (T, D) broadcast.
Val apply_rope(Val x, Val cos, Val sin, int64_t d) {
  return x * cos + rotate_half(x, d) * sin;
}

}  // namespace

std::vector<ParamSpec> llama_param_specs(const LlamaConfig& c, const ExpertShard& experts) {
  const int64_t C = c.hidden_size, D = c.head_dim;
  std::vector<ParamSpec> p;
  p.push_back({"model.embed_tokens.weight", {c.vocab_size, C}});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string s = "model.layers." + std::to_string(l) + ".";
    p.push_back({s + "input_layernorm.weight", {C}, true});
    for (const auto& [proj, heads] :
         {std::pair{"q_proj", c.num_attention_heads}, std::pair{"k_proj", c.num_key_value_heads},
          std::pair{"v_proj", c.num_key_value_heads}}) {
      p.push_back({s + "self_attn." + proj + ".weight", {heads * D, C}});
      if (c.qkv_bias) p.push_back({s + "self_attn." + proj + ".bias", {heads * D}, false, true});
    }
    p.push_back({s + "self_attn.o_proj.weight", {C, c.num_attention_heads * D}});
    if (c.qk_norm) {
      p.push_back({s + "self_attn.q_norm.weight", {D}, true});
      p.push_back({s + "self_attn.k_norm.weight", {D}, true});
    }
    p.push_back({s + "post_attention_layernorm.weight", {C}, true});
    if (c.is_sparse_layer(l)) {
      moe_param_specs(c, s, &p, experts);
      continue;
    }
    p.push_back({s + "mlp.gate_proj.weight", {c.intermediate_size, C}});
    p.push_back({s + "mlp.up_proj.weight", {c.intermediate_size, C}});
    p.push_back({s + "mlp.down_proj.weight", {C, c.intermediate_size}});
  }
  p.push_back({"model.norm.weight", {C}, true});
  if (!c.tie_word_embeddings) p.push_back({"lm_head.weight", {c.vocab_size, C}});
  return p;
}

StatusOr<LlamaGraph> build_llama(const LlamaConfig& c, Graph* g, DType dtype, bool output_logits,
                                 const LayerCallback& hook, const ExpertShard& experts) {
  LJ_RETURN_IF_ERROR(c.validate());
  if (experts.size != 1 &&
      (experts.size < 1 || !c.is_moe() || c.moe.num_experts % experts.size != 0 ||
       experts.rank < 0 || experts.rank >= experts.size)) {
    return invalid_argument("expert parallelism over " + std::to_string(experts.size) +
                                " ranks (rank " + std::to_string(experts.rank) + ") for model '" +
                                c.name + "'",
                            "the size must divide the expert count (train/expert_parallel.h)");
  }
  if (!hook.callback.empty() && (hook.after_layer < 0 || hook.after_layer >= c.num_hidden_layers)) {
    return invalid_argument("a host callback after layer " + std::to_string(hook.after_layer) +
                                " but the model has " + std::to_string(c.num_hidden_layers) +
                                " layers",
                            "use a layer from 0 to " + std::to_string(c.num_hidden_layers - 1));
  }
  Builder b(g);
  LlamaGraph out;
  const int64_t H = c.num_attention_heads, G = c.num_key_value_heads, D = c.head_dim;

  Val tokens = b.input("tokens", DType::i32, {kB, kT});
  Val targets = b.input("targets", DType::i32, {kB, kT});
  Val cos = b.input("rope.cos", dtype, {kT, D});
  Val sin = b.input("rope.sin", dtype, {kT, D});
  out.tokens = tokens.id, out.targets = targets.id, out.rope_cos = cos.id, out.rope_sin = sin.id;

  std::vector<Val> params;
  for (const ParamSpec& s : llama_param_specs(c, experts)) {
    Val p = b.param(s.name, dtype, Shape::concrete(s.dims));
    params.push_back(p);
    out.params.push_back(p.id);
  }
  size_t next = 0;
  auto take = [&] { return params[next++]; };

  std::vector<MoeMlp> sparse;  // the sparse layers' router statistics, for the auxiliary loss
  b.push_scope("model");
  Val embed = take();
  Val x;
  {
    ScopeGuard s(b, "embed_tokens");
    x = gather(embed, tokens);  // (B, T, C)
  }
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    ScopeGuard layer(b, "layers." + std::to_string(l));
    // In llama_param_specs' order: q, k, v each with its bias when there is one.
    Val w_in = take();
    Val wq = take(), bq = c.qkv_bias ? take() : Val{};
    Val wk = take(), bk = c.qkv_bias ? take() : Val{};
    Val wv = take(), bv = c.qkv_bias ? take() : Val{};
    Val wo = take();
    Val w_qnorm = c.qk_norm ? take() : Val{}, w_knorm = c.qk_norm ? take() : Val{};
    // Dense: gate_proj, up_proj, down_proj. Sparse: the router, gate_up_proj, down_proj.
    Val w_post = take(), w_gate = take(), w_up = take(), w_down = take();
    Val h;
    {
      ScopeGuard s(b, "input_layernorm");
      h = rms_norm(x, w_in, c.rms_norm_eps);
    }
    Val attn;
    {
      ScopeGuard s(b, "self_attn");
      // (B, heads, T, D): the projection, with its bias (Qwen2) when it has one, then (Qwen3)
      // RMSNorm over D of each head, before the transpose and RoPE.
      const auto project = [&](const char* name, const char* norm_name, Val w, Val bias, Val norm_w,
                               int64_t heads) {
        Val y;
        {
          ScopeGuard p(b, name);
          y = linear(h, w);
          if (bias.valid()) y = y + bias;
          y = reshape(y, {kB, kT, heads, D});
          if (!norm_w.valid()) return permute(y, {0, 2, 1, 3});
        }
        ScopeGuard n(b, norm_name);
        return permute(rms_norm(y, norm_w, c.rms_norm_eps), {0, 2, 1, 3});
      };
      Val q = project("q_proj", "q_norm", wq, bq, w_qnorm, H);  // (B, H, T, D)
      Val k = project("k_proj", "k_norm", wk, bk, w_knorm, G);  // (B, G, T, D)
      Val v = project("v_proj", "", wv, bv, Val{}, G);          // (B, G, T, D)
      {
        ScopeGuard r(b, "rotary_emb");
        q = apply_rope(q, cos, sin, D);
        k = apply_rope(k, cos, sin, D);
      }
      Val o = sdpa(q, k, v, /*causal=*/true, 0.0, c.window_of_layer(l)).out;  // (B, H, T, D)
      o = reshape(permute(o, {0, 2, 1, 3}), {kB, kT, H * D});                 // (B, T, H*D)
      ScopeGuard p(b, "o_proj");
      attn = linear(o, wo);  // (B, T, C)
    }
    x = x + attn;
    {
      ScopeGuard s(b, "post_attention_layernorm");
      h = rms_norm(x, w_post, c.rms_norm_eps);
    }
    if (c.is_sparse_layer(l)) {
      ScopeGuard s(b, "mlp");
      sparse.push_back(moe_mlp(c, h, w_gate, w_up, w_down, experts));
      x = x + sparse.back().out;
    } else {
      ScopeGuard s(b, "mlp");
      Val gate, up;
      {
        ScopeGuard p(b, "gate_proj");
        gate = linear(h, w_gate);  // (B, T, F)
      }
      {
        ScopeGuard p(b, "up_proj");
        up = linear(h, w_up);
      }
      Val act = silu(gate) * up;
      ScopeGuard p(b, "down_proj");
      x = x + linear(act, w_down);
    }
    if (!hook.callback.empty() && hook.after_layer == l) x = opaque(x, hook.callback);
  }
  {
    ScopeGuard s(b, "norm");
    x = rms_norm(x, take(), c.rms_norm_eps);
  }
  b.pop_scope();
  Val lm_head = c.tie_word_embeddings ? embed : take();
  Val logits, loss;
  {
    ScopeGuard s(b, "lm_head");
    logits = linear(x, lm_head);  // (B, T, V)
  }
  {
    ScopeGuard s(b, "loss");
    loss =
        cross_entropy(reshape(logits, {kB * kT, c.vocab_size}), reshape(targets, {kB * kT}), -100);
  }
  if (c.moe.output_router_logits && !sparse.empty()) {
    ScopeGuard s(b, "aux_loss");
    loss = loss + load_balancing_loss(c, sparse) * c.moe.router_aux_loss_coef;
  }
  if (!b.ok()) return b.status();
  out.logits = logits.id;
  out.loss = loss.id;
  b.output("loss", loss);
  if (output_logits) b.output("logits", logits);
  return out;
}

}  // namespace lj
