// Linear algebra, convolution, pooling, normalization, softmax and loss kernels.
#include "common.h"

namespace simnpu::ops {
using namespace simnpu::detail;

Tensor mm(simnpuStream_t s, const Tensor& self, const Tensor& mat2) {
  const Tensor& like = check_devices("mm", {&self, &mat2}, false);
  Tensor out = alloc_like_meta(at::mm(meta(self), meta(mat2)), like);
  TMeta a = cap(self), b = cap(mat2), o = cap(out);
  launch(s, "mm", [a, b, o] {
    Tensor ov = o.view();
    at::mm_out(ov, a.view(), b.view());
  });
  return out;
}

Tensor addmm(simnpuStream_t s, const Tensor& self, const Tensor& mat1, const Tensor& mat2,
             const at::Scalar& beta, const at::Scalar& alpha) {
  const Tensor& like = check_devices("addmm", {&self, &mat1, &mat2});
  Tensor out = alloc_like_meta(at::addmm(meta(self), meta(mat1), meta(mat2), beta, alpha), like);
  TMeta c = cap(self), a = cap(mat1), b = cap(mat2), o = cap(out);
  launch(s, "addmm", [c, a, b, o, beta, alpha] {
    Tensor ov = o.view();
    at::addmm_out(ov, c.view(), a.view(), b.view(), beta, alpha);
  });
  return out;
}

namespace {
// An out= matrix product: `out` (a simnpu tensor of the result's dtype) resized to the result
// on the device; operands that alias it are read from copies.
template <class OutFn>
Tensor& product_out(simnpuStream_t s, const char* name, const Tensor& m, std::initializer_list<const Tensor*> ins,
                    Tensor& out, OutFn out_fn) {
  TORCH_CHECK(out.device().type() == c10::DeviceType::PrivateUse1, "simnpu::", name, ": out must be a simnpu tensor");
  TORCH_CHECK(out.scalar_type() == m.scalar_type(), "simnpu::", name, ": expected out of dtype ", m.scalar_type(),
              ", got ", out.scalar_type());
  if (out.sizes() != m.sizes()) out.resize_(m.sizes());
  std::vector<TMeta> operands;
  bool alias = false;
  for (const Tensor* t : ins) {
    alias = alias || (t->device() == out.device() && t->is_alias_of(out));
    operands.push_back(cap(*t));
  }
  TMeta o = cap(out);
  launch(s, name, [operands, o, out_fn, alias] {
    Tensor ov = o.view();
    std::vector<Tensor> views;
    for (const TMeta& t : operands) views.push_back(alias ? t.view().clone() : t.view());
    out_fn(ov, views);
  });
  return out;
}
}  // namespace

Tensor& mm_out(simnpuStream_t s, const Tensor& self, const Tensor& mat2, Tensor& out) {
  check_devices("mm_out", {&self, &mat2, &out}, false);
  return product_out(s, "mm_out", at::mm(meta(self), meta(mat2)), {&self, &mat2}, out,
                     [](Tensor& o, const std::vector<Tensor>& v) { at::mm_out(o, v[0], v[1]); });
}

Tensor& addmm_out(simnpuStream_t s, const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                  const at::Scalar& beta, const at::Scalar& alpha, Tensor& out) {
  check_devices("addmm_out", {&self, &mat1, &mat2, &out});
  return product_out(s, "addmm_out", at::addmm(meta(self), meta(mat1), meta(mat2), beta, alpha),
                     {&self, &mat1, &mat2}, out, [beta, alpha](Tensor& o, const std::vector<Tensor>& v) {
                       at::addmm_out(o, v[0], v[1], v[2], beta, alpha);
                     });
}

namespace {
// Expand a per-spatial-dim parameter given with one element.
std::vector<int64_t> expand_param(at::IntArrayRef v, int64_t n, const char* what) {
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  TORCH_CHECK((int64_t)v.size() == n, "simnpu::convolution: expected ", what, " to have ", n,
              " elements, got ", v.size());
  return v.vec();
}

std::vector<int64_t> conv_output_shape(const Tensor& input, const Tensor& weight,
                                       at::IntArrayRef stride, at::IntArrayRef padding,
                                       at::IntArrayRef dilation, bool transposed,
                                       at::IntArrayRef output_padding, int64_t groups) {
  int64_t dim = input.dim();
  TORCH_CHECK(dim >= 3, "simnpu::convolution: expected a batched input of at least 3 dims, got ",
              input.sizes());
  TORCH_CHECK(weight.dim() == dim, "simnpu::convolution: weight of ", weight.dim(),
              " dims for input of ", dim, " dims");
  TORCH_CHECK(groups > 0, "simnpu::convolution: non-positive groups");
  int64_t k = dim - 2;
  auto st = expand_param(stride, k, "stride"), pa = expand_param(padding, k, "padding"),
       di = expand_param(dilation, k, "dilation");
  auto op = transposed ? expand_param(output_padding, k, "output_padding") : std::vector<int64_t>(k, 0);
  for (int64_t i = 0; i < k; ++i)
    TORCH_CHECK(st[i] > 0 && di[i] > 0 && pa[i] >= 0, "simnpu::convolution: bad stride/dilation/padding");
  std::vector<int64_t> out{input.size(0)};
  if (!transposed) {
    TORCH_CHECK(input.size(1) == weight.size(1) * groups, "simnpu::convolution: input has ",
                input.size(1), " channels, expected ", weight.size(1) * groups);
    TORCH_CHECK(weight.size(0) % groups == 0, "simnpu::convolution: out channels not divisible by groups");
    out.push_back(weight.size(0));
    for (int64_t i = 0; i < k; ++i) {
      int64_t o = (input.size(i + 2) + 2 * pa[i] - di[i] * (weight.size(i + 2) - 1) - 1) / st[i] + 1;
      TORCH_CHECK(o > 0, "simnpu::convolution: output size is too small (input ", input.sizes(),
                  ", kernel ", weight.sizes(), ")");
      out.push_back(o);
    }
  } else {
    TORCH_CHECK(input.size(1) == weight.size(0), "simnpu::convolution: transposed input has ",
                input.size(1), " channels, expected ", weight.size(0));
    out.push_back(weight.size(1) * groups);
    for (int64_t i = 0; i < k; ++i) {
      int64_t o = (input.size(i + 2) - 1) * st[i] - 2 * pa[i] + di[i] * (weight.size(i + 2) - 1) + op[i] + 1;
      TORCH_CHECK(o > 0, "simnpu::convolution: output size is too small");
      out.push_back(o);
    }
  }
  return out;
}
// The layout of a convolution's outputs, as torch_fl's contract (and torch's tracing, told
// by it) gives it: a 2-d convolution's channels-last when the input or the weight is, as
// cuDNN's and oneDNN's; anything else contiguous.
at::MemoryFormat conv_memory_format(const Tensor& input, const Tensor& weight) {
  const auto last = at::MemoryFormat::ChannelsLast;
  return input.dim() == 4 && (input.suggest_memory_format() == last || weight.suggest_memory_format() == last)
             ? last : at::MemoryFormat::Contiguous;
}
}  // namespace


Tensor convolution(simnpuStream_t s, const Tensor& input, const Tensor& weight,
                   const std::optional<Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                   at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
                   int64_t groups) {
  const Tensor& like = check_devices("convolution", {&input, &weight, p(bias)}, false);
  auto shape = conv_output_shape(input, weight, stride, padding, dilation, transposed, output_padding, groups);
  if (bias && bias->defined())
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == shape[1], "simnpu::convolution: bias of shape ",
                bias->sizes(), " for ", shape[1], " output channels");
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "simnpu::convolution: input (",
              input.scalar_type(), ") and weight (", weight.scalar_type(), ") dtypes differ");
  Tensor out = alloc(shape, input.scalar_type(), like, conv_memory_format(input, weight));
  TMeta x = cap(input), w = cap(weight), b = cap(bias), o = cap(out);
  launch(s, "convolution",
         [x, w, b, o, st = vec(stride), pa = vec(padding), di = vec(dilation), transposed,
          op = vec(output_padding), groups] {
           write(o, at::convolution(x.view(), w.view(), b.opt(), st, pa, di, transposed, op, groups));
         });
  return out;
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward(
    simnpuStream_t s, const Tensor& grad_output, const Tensor& input, const Tensor& weight,
    at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  const Tensor& like = check_devices("convolution_backward", {&grad_output, &input, &weight}, false);
  auto shape = conv_output_shape(input, weight, stride, padding, dilation, transposed, output_padding, groups);
  TORCH_CHECK(grad_output.sizes().vec() == shape, "simnpu::convolution_backward: grad_output of shape ",
              grad_output.sizes(), ", expected ", at::IntArrayRef(shape));
  Tensor gi, gw, gb;
  const auto fmt = conv_memory_format(input, weight);
  if (output_mask[0]) gi = alloc(input.sizes(), input.scalar_type(), like, fmt);
  if (output_mask[1]) gw = alloc(weight.sizes(), weight.scalar_type(), like, fmt);
  if (output_mask[2]) {
    int64_t c = bias_sizes ? (*bias_sizes)[0] : shape[1];
    gb = alloc({c}, grad_output.scalar_type(), like);
  }
  TMeta g = cap(grad_output), x = cap(input), w = cap(weight), ogi = cap(gi), ogw = cap(gw), ogb = cap(gb);
  launch(s, "convolution_backward",
         [g, x, w, ogi, ogw, ogb, bs = vec(bias_sizes), st = vec(stride), pa = vec(padding),
          di = vec(dilation), transposed, op = vec(output_padding), groups, output_mask] {
           auto r = at::convolution_backward(g.view(), x.view(), w.view(), ref(bs), st, pa, di,
                                             transposed, op, groups, output_mask);
           write(ogi, std::get<0>(r));
           write(ogw, std::get<1>(r));
           write(ogb, std::get<2>(r));
         });
  return {gi, gw, gb};
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(simnpuStream_t s, const Tensor& self,
                                                   at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                   at::IntArrayRef padding, at::IntArrayRef dilation,
                                                   bool ceil_mode) {
  const Tensor& like = check_devices("max_pool2d_with_indices", {&self}, false);
  auto m = at::max_pool2d_with_indices(meta(self), kernel_size, stride, padding, dilation, ceil_mode);
  Tensor out = alloc_like_meta(std::get<0>(m), like), idx = alloc_like_meta(std::get<1>(m), like);
  TMeta x = cap(self), o = cap(out), oi = cap(idx);
  launch(s, "max_pool2d_with_indices",
         [x, o, oi, k = vec(kernel_size), st = vec(stride), pa = vec(padding), di = vec(dilation), ceil_mode] {
           Tensor ov = o.view(), iv = oi.view();
           at::max_pool2d_with_indices_out(ov, iv, x.view(), k, st, pa, di, ceil_mode);
         });
  return {out, idx};
}

Tensor max_pool2d_with_indices_backward(simnpuStream_t s, const Tensor& grad_output,
                                        const Tensor& self, at::IntArrayRef kernel_size,
                                        at::IntArrayRef stride, at::IntArrayRef padding,
                                        at::IntArrayRef dilation, bool ceil_mode,
                                        const Tensor& indices) {
  const Tensor& like = check_devices("max_pool2d_with_indices_backward", {&grad_output, &self, &indices}, false);
  Tensor gi = alloc_like_meta(
      at::max_pool2d_with_indices_backward(meta(grad_output), meta(self), kernel_size, stride, padding,
                                           dilation, ceil_mode, meta(indices)),
      like);
  TMeta g = cap(grad_output), x = cap(self), ix = cap(indices), o = cap(gi);
  launch(s, "max_pool2d_with_indices_backward",
         [g, x, ix, o, k = vec(kernel_size), st = vec(stride), pa = vec(padding), di = vec(dilation), ceil_mode] {
           Tensor ov = o.view();
           at::max_pool2d_with_indices_backward_out(ov, g.view(), x.view(), k, st, pa, di, ceil_mode, ix.view());
         });
  return gi;
}

Tensor adaptive_avg_pool2d(simnpuStream_t s, const Tensor& self, at::IntArrayRef output_size) {
  const Tensor& like = check_devices("adaptive_avg_pool2d", {&self}, false);
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, "simnpu::adaptive_avg_pool2d: expected 3D or 4D input, got ",
              self.sizes());
  TORCH_CHECK(output_size.size() == 2 && output_size[0] >= 0 && output_size[1] >= 0,
              "simnpu::adaptive_avg_pool2d: output_size must be 2 non-negative ints");
  for (int64_t i = 1; i < self.dim(); ++i)
    TORCH_CHECK(self.size(i) > 0, "simnpu::adaptive_avg_pool2d: empty non-batch dimension in ", self.sizes());
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - 2);
  shape.push_back(output_size[0]);
  shape.push_back(output_size[1]);
  Tensor out = alloc(shape, self.scalar_type(), like, self.suggest_memory_format());
  TMeta x = cap(self), o = cap(out);
  launch(s, "adaptive_avg_pool2d",
         [x, o, os = vec(output_size)] { write(o, at::_adaptive_avg_pool2d(x.view(), os)); });
  return out;
}

Tensor adaptive_avg_pool2d_backward(simnpuStream_t s, const Tensor& grad_output, const Tensor& self) {
  const Tensor& like = check_devices("adaptive_avg_pool2d_backward", {&grad_output, &self}, false);
  TORCH_CHECK(grad_output.dim() == self.dim(), "simnpu::adaptive_avg_pool2d_backward: rank mismatch");
  Tensor gi = alloc(self.sizes(), self.scalar_type(), like, self.suggest_memory_format());
  TMeta g = cap(grad_output), x = cap(self), o = cap(gi);
  launch(s, "adaptive_avg_pool2d_backward",
         [g, x, o] { write(o, at::_adaptive_avg_pool2d_backward(g.view(), x.view())); });
  return gi;
}

namespace {
at::ScalarType stat_dtype(const Tensor& input, const std::optional<Tensor>& weight) {
  bool reduced = input.scalar_type() == at::kHalf || input.scalar_type() == at::kBFloat16;
  if (reduced && weight && weight->defined() && weight->scalar_type() == at::kFloat) return at::kFloat;
  return input.scalar_type();
}
}  // namespace

std::tuple<Tensor, Tensor, Tensor> batch_norm(
    simnpuStream_t s, const Tensor& input, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& bias, const std::optional<Tensor>& running_mean,
    const std::optional<Tensor>& running_var, bool training, double momentum, double eps) {
  const Tensor& like = check_devices("batch_norm", {&input, p(weight), p(bias), p(running_mean), p(running_var)}, false);
  TORCH_CHECK(input.dim() >= 2, "simnpu::batch_norm: expected at least 2D input, got ", input.sizes());
  int64_t c = input.size(1);
  for (const auto* t : {p(weight), p(bias), p(running_mean), p(running_var)})
    if (t && t->defined())
      TORCH_CHECK(t->numel() == c, "simnpu::batch_norm: per-channel tensor of ", t->numel(),
                  " elements for ", c, " channels");
  if (!training)
    TORCH_CHECK(running_mean && running_mean->defined() && running_var && running_var->defined(),
                "simnpu::batch_norm: running_mean and running_var are required in eval mode");
  if (training) {
    int64_t per_channel = input.numel() / std::max<int64_t>(c, 1);
    TORCH_CHECK(per_channel > 1, "simnpu::batch_norm: expected more than 1 value per channel when training, got input of size ",
                input.sizes());
  }
  Tensor out = alloc(input.sizes(), input.scalar_type(), like, input.suggest_memory_format());
  at::ScalarType sd = stat_dtype(input, weight);
  Tensor save_mean = alloc({training ? c : 0}, sd, like), save_invstd = alloc({training ? c : 0}, sd, like);
  TMeta x = cap(input), w = cap(weight), b = cap(bias), rm = cap(running_mean), rv = cap(running_var),
        o = cap(out), sm = cap(save_mean), si = cap(save_invstd);
  launch(s, "batch_norm", [x, w, b, rm, rv, o, sm, si, training, momentum, eps] {
    // running_mean/var are views of the device buffers: updated in place when training
    auto r = at::native_batch_norm(x.view(), w.opt(), b.opt(), rm.opt(), rv.opt(), training, momentum, eps);
    write(o, std::get<0>(r));
    if (sm.sizes[0] > 0) {
      write(sm, std::get<1>(r));
      write(si, std::get<2>(r));
    }
  });
  return {out, save_mean, save_invstd};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(
    simnpuStream_t s, const Tensor& grad_out, const Tensor& input,
    const std::optional<Tensor>& weight, const std::optional<Tensor>& running_mean,
    const std::optional<Tensor>& running_var, const std::optional<Tensor>& save_mean,
    const std::optional<Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask) {
  const Tensor& like = check_devices("batch_norm_backward", {&grad_out, &input, p(weight), p(running_mean),
                                     p(running_var), p(save_mean), p(save_invstd)}, false);
  TORCH_CHECK(grad_out.sizes() == input.sizes(), "simnpu::batch_norm_backward: grad_out of shape ",
              grad_out.sizes(), " for input ", input.sizes());
  int64_t c = input.size(1);
  at::ScalarType pd = weight && weight->defined() ? weight->scalar_type() : input.scalar_type();
  Tensor gi, gw, gb;
  if (output_mask[0]) gi = alloc(input.sizes(), input.scalar_type(), like, input.suggest_memory_format());
  if (output_mask[1]) gw = alloc({c}, pd, like);
  if (output_mask[2]) gb = alloc({c}, pd, like);
  TMeta g = cap(grad_out), x = cap(input), w = cap(weight), rm = cap(running_mean), rv = cap(running_var),
        sm = cap(save_mean), si = cap(save_invstd), ogi = cap(gi), ogw = cap(gw), ogb = cap(gb);
  launch(s, "batch_norm_backward", [=] {
    // The saved statistics may come from another kernel's forward: float32 for half-precision
    // input, as torch's meta function and CUDA give them (a Triton forward), where this SDK's
    // forward saves them in the dtype the host kernel expects. It gets them in that dtype.
    const Tensor xv = x.view();
    const std::optional<Tensor> wv = w.opt();
    const at::ScalarType saved = stat_dtype(xv, wv);
    const auto as_saved = [saved](std::optional<Tensor> t) {
      if (t && t->defined() && t->numel() > 0) t = t->to(saved);
      return t;
    };
    auto r = at::native_batch_norm_backward(g.view(), xv, wv, rm.opt(), rv.opt(), as_saved(sm.opt()),
                                            as_saved(si.opt()), train, eps, output_mask);
    write(ogi, std::get<0>(r));
    write(ogw, std::get<1>(r));
    write(ogb, std::get<2>(r));
  });
  return {gi, gw, gb};
}

Tensor log_softmax(simnpuStream_t s, const Tensor& self, int64_t dim, bool half_to_float) {
  const Tensor& like = check_devices("log_softmax", {&self}, false);
  Tensor out = alloc_like_meta(at::_log_softmax(meta(self), dim, half_to_float), like);
  TMeta x = cap(self), o = cap(out);
  launch(s, "log_softmax", [x, o, dim, half_to_float] {
    Tensor ov = o.view();
    at::_log_softmax_out(ov, x.view(), dim, half_to_float);
  });
  return out;
}

Tensor log_softmax_backward(simnpuStream_t s, const Tensor& grad_output, const Tensor& output,
                            int64_t dim, at::ScalarType input_dtype) {
  const Tensor& like = check_devices("log_softmax_backward", {&grad_output, &output}, false);
  Tensor gi = alloc_like_meta(at::_log_softmax_backward_data(meta(grad_output), meta(output), dim, input_dtype), like);
  TMeta g = cap(grad_output), y = cap(output), o = cap(gi);
  // Computed, then written into the output's layout: the output takes the meta kernel's
  // strides (those of grad_output), which ATen's CPU out= kernel would treat as contiguous
  // (a transposed grad_output, e.g. CTC loss over log_softmax(...).transpose(0, 1), came
  // back scrambled).
  launch(s, "log_softmax_backward", [g, y, o, dim, input_dtype] {
    write(o, at::_log_softmax_backward_data(g.view(), y.view(), dim, input_dtype));
  });
  return gi;
}

std::tuple<Tensor, Tensor> nll_loss_forward(simnpuStream_t s, const Tensor& self, const Tensor& target,
                                            const std::optional<Tensor>& weight, int64_t reduction,
                                            int64_t ignore_index) {
  const Tensor& like = check_devices("nll_loss_forward", {&self, &target, p(weight)}, false);
  auto m = at::nll_loss_forward(meta(self), meta(target), meta(weight), reduction, ignore_index);
  Tensor out = alloc_like_meta(std::get<0>(m), like), tw = alloc_like_meta(std::get<1>(m), like);
  TMeta x = cap(self), t = cap(target), w = cap(weight), o = cap(out), otw = cap(tw);
  launch(s, "nll_loss_forward", [x, t, w, o, otw, reduction, ignore_index] {
    Tensor ov = o.view(), tv = otw.view();
    at::nll_loss_forward_out(ov, tv, x.view(), t.view(), w.opt(), reduction, ignore_index);
  });
  return {out, tw};
}

Tensor nll_loss_backward(simnpuStream_t s, const Tensor& grad_output, const Tensor& self,
                         const Tensor& target, const std::optional<Tensor>& weight,
                         int64_t reduction, int64_t ignore_index, const Tensor& total_weight) {
  const Tensor& like = check_devices("nll_loss_backward", {&grad_output, &self, &target, p(weight), &total_weight}, false);
  Tensor gi = alloc_like_meta(at::nll_loss_backward(meta(grad_output), meta(self), meta(target), meta(weight),
                                                    reduction, ignore_index, meta(total_weight)),
                              like);
  TMeta g = cap(grad_output), x = cap(self), t = cap(target), w = cap(weight), tw = cap(total_weight), o = cap(gi);
  launch(s, "nll_loss_backward", [g, x, t, w, tw, o, reduction, ignore_index] {
    Tensor ov = o.view();
    at::nll_loss_backward_out(ov, g.view(), x.view(), t.view(), w.opt(), reduction, ignore_index, tw.view());
  });
  return gi;
}

}  // namespace simnpu::ops
