// Pointwise kernels: broadcasting and type promotion exactly as ATen (the
// meta run of the op computes the output and validates in-place variants).
#include "common.h"

namespace simnpu::ops {
using namespace simnpu::detail;

namespace {

// out = op(self, other) with a fresh output; meta_fn gives the output metadata.
template <class MetaFn, class OutFn>
Tensor binary(simnpuStream_t stream, const char* name, const Tensor& self, const Tensor& other,
              MetaFn meta_fn, OutFn out_fn) {
  const Tensor& like = check_devices(name, {&self, &other});
  Tensor out = alloc_like_meta(meta_fn(meta_operand(self, other), meta_operand(other, self)), like);
  TMeta a = cap(self), b = cap(other), o = cap(out);
  launch(stream, name, [a, b, o, out_fn] {
    Tensor ov = o.view();
    out_fn(ov, a.view(), b.view());
  });
  return out;
}

// self = op_(self, other); meta_fn runs the in-place op on meta tensors (validation).
template <class MetaFn, class InplaceFn>
Tensor& binary_(simnpuStream_t stream, const char* name, Tensor& self, const Tensor& other,
                MetaFn meta_fn, InplaceFn fn) {
  TORCH_CHECK(self.device().type() == c10::DeviceType::PrivateUse1, "simnpu::", name,
              ": self must be a simnpu tensor");
  check_devices(name, {&self, &other});
  // Checked on the operands themselves: their metas lose what a wrapped number promotes to.
  const auto result = at::result_type(self, other);
  TORCH_CHECK(at::canCast(result, self.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", self.scalar_type());
  Tensor ms = meta(self);
  meta_fn(ms, meta_operand(other, self));
  bool alias = other.device() == self.device() && other.is_alias_of(self);
  TMeta a = cap(self), b = cap(other);
  launch(stream, name, [a, b, fn, alias] {
    Tensor sv = a.view();
    Tensor ov = b.view();
    if (alias) ov = ov.clone();  // separate from_blob views don't see their overlap
    fn(sv, ov);
  });
  return self;
}

// out = op(self, other) into a caller's tensor (resized if its shape differs,
// as ATen's out= ops do); inputs aliasing `out` are read from a copy.
template <class MetaFn, class OutFn>
Tensor& binary_out(simnpuStream_t stream, const char* name, const Tensor& self, const Tensor& other,
                   Tensor& out, MetaFn meta_fn, OutFn out_fn) {
  TORCH_CHECK(out.device().type() == c10::DeviceType::PrivateUse1, "simnpu::", name,
              ": out must be a simnpu tensor");
  check_devices(name, {&self, &other, &out});
  Tensor m = meta_fn(meta_operand(self, other), meta_operand(other, self));
  TORCH_CHECK(at::canCast(m.scalar_type(), out.scalar_type()), "simnpu::", name, ": result type ",
              m.scalar_type(), " can't be cast to the desired output type ", out.scalar_type());
  if (out.sizes() != m.sizes()) out.resize_(m.sizes());
  const bool alias = (self.device() == out.device() && self.is_alias_of(out)) ||
                     (other.device() == out.device() && other.is_alias_of(out));
  TMeta a = cap(self), b = cap(other), o = cap(out);
  launch(stream, name, [a, b, o, out_fn, alias] {
    Tensor ov = o.view();
    Tensor av = a.view(), bv = b.view();
    if (alias) {
      av = av.clone();
      bv = bv.clone();
    }
    out_fn(ov, av, bv);
  });
  return out;
}

}  // namespace

Tensor add(simnpuStream_t s, const Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  return binary(
      s, "add", self, other, [&](const Tensor& a, const Tensor& b) { return at::add(a, b, alpha); },
      [alpha](Tensor& o, const Tensor& a, const Tensor& b) { at::add_out(o, a, b, alpha); });
}
Tensor& add_(simnpuStream_t s, Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  return binary_(
      s, "add_", self, other, [&](Tensor& a, const Tensor& b) { a.add_(b, alpha); },
      [alpha](Tensor& a, const Tensor& b) { a.add_(b, alpha); });
}
// ATen checks this in its CPU and CUDA kernels, not in sub's meta function: checked here
// before the launch, so that it raises at the call instead of failing on the device.
static void check_sub_operands(const Tensor& self, const Tensor& other) {
  TORCH_CHECK(self.scalar_type() != at::kBool || other.scalar_type() != at::kBool,
              "Subtraction, the `-` operator, with two bool tensors is not supported. "
              "Use the `^` or `logical_xor()` operator instead.");
  TORCH_CHECK(self.scalar_type() != at::kBool && other.scalar_type() != at::kBool,
              "Subtraction, the `-` operator, with a bool tensor is not supported. "
              "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
}

Tensor sub(simnpuStream_t s, const Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  check_sub_operands(self, other);
  return binary(
      s, "sub", self, other, [&](const Tensor& a, const Tensor& b) { return at::sub(a, b, alpha); },
      [alpha](Tensor& o, const Tensor& a, const Tensor& b) { at::sub_out(o, a, b, alpha); });
}
Tensor& sub_(simnpuStream_t s, Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  check_sub_operands(self, other);
  return binary_(
      s, "sub_", self, other, [&](Tensor& a, const Tensor& b) { a.sub_(b, alpha); },
      [alpha](Tensor& a, const Tensor& b) { a.sub_(b, alpha); });
}
Tensor mul(simnpuStream_t s, const Tensor& self, const Tensor& other) {
  return binary(
      s, "mul", self, other, [](const Tensor& a, const Tensor& b) { return at::mul(a, b); },
      [](Tensor& o, const Tensor& a, const Tensor& b) { at::mul_out(o, a, b); });
}
Tensor& mul_(simnpuStream_t s, Tensor& self, const Tensor& other) {
  return binary_(
      s, "mul_", self, other, [](Tensor& a, const Tensor& b) { a.mul_(b); },
      [](Tensor& a, const Tensor& b) { a.mul_(b); });
}
Tensor div(simnpuStream_t s, const Tensor& self, const Tensor& other) {
  return binary(
      s, "div", self, other, [](const Tensor& a, const Tensor& b) { return at::div(a, b); },
      [](Tensor& o, const Tensor& a, const Tensor& b) { at::div_out(o, a, b); });
}
Tensor& div_(simnpuStream_t s, Tensor& self, const Tensor& other) {
  return binary_(
      s, "div_", self, other, [](Tensor& a, const Tensor& b) { a.div_(b); },
      [](Tensor& a, const Tensor& b) { a.div_(b); });
}

Tensor relu(simnpuStream_t s, const Tensor& self) {
  const Tensor& like = check_devices("relu", {&self}, false);
  TORCH_CHECK(self.scalar_type() != at::kBool, "simnpu::relu: bool tensors are not supported");
  // Laid out as the input (relu has no C++ meta kernel: the vendor library runs without Python).
  Tensor out = alloc_like_meta(at::empty_like(meta(self)), like);
  TMeta a = cap(self), o = cap(out);
  launch(s, "relu", [a, o] { write(o, at::relu(a.view())); });
  return out;
}
Tensor& relu_(simnpuStream_t s, Tensor& self) {
  check_devices("relu_", {&self}, false);
  TORCH_CHECK(self.scalar_type() != at::kBool, "simnpu::relu_: bool tensors are not supported");
  TMeta a = cap(self);
  launch(s, "relu_", [a] {
    Tensor v = a.view();
    at::relu_(v);
  });
  return self;
}

Tensor threshold_backward(simnpuStream_t s, const Tensor& grad_output, const Tensor& self,
                          const at::Scalar& threshold) {
  return binary(
      s, "threshold_backward", grad_output, self,
      [&](const Tensor& g, const Tensor& x) { return at::threshold_backward(g, x, threshold); },
      [threshold](Tensor& o, const Tensor& g, const Tensor& x) {
        at::threshold_backward_out(o, g, x, threshold);
      });
}

}  // namespace simnpu::ops

namespace simnpu::ops {

Tensor& add_out(simnpuStream_t s, const Tensor& self, const Tensor& other, const at::Scalar& alpha, Tensor& out) {
  return binary_out(
      s, "add_out", self, other, out, [&](const Tensor& a, const Tensor& b) { return at::add(a, b, alpha); },
      [alpha](Tensor& o, const Tensor& a, const Tensor& b) { at::add_out(o, a, b, alpha); });
}
Tensor& sub_out(simnpuStream_t s, const Tensor& self, const Tensor& other, const at::Scalar& alpha, Tensor& out) {
  check_sub_operands(self, other);
  return binary_out(
      s, "sub_out", self, other, out, [&](const Tensor& a, const Tensor& b) { return at::sub(a, b, alpha); },
      [alpha](Tensor& o, const Tensor& a, const Tensor& b) { at::sub_out(o, a, b, alpha); });
}
Tensor& mul_out(simnpuStream_t s, const Tensor& self, const Tensor& other, Tensor& out) {
  return binary_out(
      s, "mul_out", self, other, out, [](const Tensor& a, const Tensor& b) { return at::mul(a, b); },
      [](Tensor& o, const Tensor& a, const Tensor& b) { at::mul_out(o, a, b); });
}
Tensor& div_out(simnpuStream_t s, const Tensor& self, const Tensor& other, Tensor& out) {
  return binary_out(
      s, "div_out", self, other, out, [](const Tensor& a, const Tensor& b) { return at::div(a, b); },
      [](Tensor& o, const Tensor& a, const Tensor& b) { at::div_out(o, a, b); });
}

}  // namespace simnpu::ops
