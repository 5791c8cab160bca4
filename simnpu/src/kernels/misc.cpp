// Reductions, fill/copy/cat and random kernels.
#include "common.h"

namespace simnpu::ops {
using namespace simnpu::detail;

Tensor sum(simnpuStream_t s, const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
           std::optional<at::ScalarType> dtype) {
  const Tensor& like = check_devices("sum", {&self}, false);
  Tensor out = alloc_like_meta(at::sum(meta(self), dim, keepdim, dtype), like);
  TMeta x = cap(self), o = cap(out);
  launch(s, "sum", [x, o, d = vec(dim), keepdim, dtype] {
    Tensor ov = o.view();
    at::sum_out(ov, x.view(), ref(d), keepdim, dtype);
  });
  return out;
}

Tensor mean(simnpuStream_t s, const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
            std::optional<at::ScalarType> dtype) {
  const Tensor& like = check_devices("mean", {&self}, false);
  Tensor out = alloc_like_meta(at::mean(meta(self), dim, keepdim, dtype), like);
  TMeta x = cap(self), o = cap(out);
  launch(s, "mean", [x, o, d = vec(dim), keepdim, dtype] {
    Tensor ov = o.view();
    at::mean_out(ov, x.view(), ref(d), keepdim, dtype);
  });
  return out;
}

Tensor& fill_(simnpuStream_t s, Tensor& self, const at::Scalar& value) {
  check_devices("fill_", {&self}, false);
  TMeta x = cap(self);
  launch(s, "fill_", [x, value] { x.view().fill_(value); });
  return self;
}

Tensor& zero_(simnpuStream_t s, Tensor& self) {
  check_devices("zero_", {&self}, false);
  TMeta x = cap(self);
  launch(s, "zero_", [x] { x.view().zero_(); });
  return self;
}

Tensor& copy_(simnpuStream_t s, Tensor& self, const Tensor& src, bool non_blocking) {
  TORCH_CHECK(self.device().type() == c10::DeviceType::PrivateUse1,
              "simnpu::copy_: self must be a simnpu tensor, got ", self.device());
  TORCH_CHECK(src.device() == self.device() || (src.device().is_cpu() && src.dim() == 0),
              "simnpu::copy_: the kernel copies within one simnpu device (self on ", self.device(),
              ", src on ", src.device(), "); cross-device and host copies go through the driver's memcpy");
  TORCH_CHECK(at::is_expandable_to(src.sizes(), self.sizes()), "simnpu::copy_: src of shape ",
              src.sizes(), " is not broadcastable to self of shape ", self.sizes());
  bool alias = src.device() == self.device() && src.is_alias_of(self);
  TMeta d = cap(self), x = cap(src);
  launch(s, "copy_", [d, x, alias] {
    Tensor sv = x.view();
    if (alias) sv = sv.clone();
    d.view().copy_(sv);
  });
  return self;
}

Tensor cat(simnpuStream_t s, const at::ITensorListRef& tensors, int64_t dim) {
  std::vector<Tensor> ts(tensors.begin(), tensors.end());
  TORCH_CHECK(!ts.empty(), "simnpu::cat: expected a non-empty list of tensors");
  const Tensor* like = nullptr;
  std::vector<Tensor> metas;
  std::vector<TMeta> caps;
  metas.reserve(ts.size());
  caps.reserve(ts.size());
  for (const Tensor& t : ts) {
    const Tensor& l = check_devices("cat", {&t}, false);
    if (!like) like = &l;
    TORCH_CHECK(t.device() == like->device(), "simnpu::cat: expected all tensors on ", like->device(),
                ", got one on ", t.device());
    metas.push_back(meta(t));
    caps.push_back(cap(t));
  }
  Tensor out = alloc_like_meta(at::cat(metas, dim), *like);
  TMeta o = cap(out);
  launch(s, "cat", [caps, o, dim] {
    std::vector<Tensor> views;
    views.reserve(caps.size());
    for (const auto& c : caps) views.push_back(c.view());
    Tensor ov = o.view();
    at::cat_out(ov, views, dim);
  });
  return out;
}

namespace {
// Queue fn(view of self, cpu generator) in stream order.
Tensor& random_kernel(simnpuStream_t s, const char* name, Tensor& self,
                      const std::optional<at::Generator>& generator,
                      std::function<void(Tensor&, at::Generator&)> fn) {
  check_devices(name, {&self}, false);
  at::Generator gen = resolve_generator(generator, self);
  TMeta x = cap(self);
  launch(s, name, [x, gen, fn] {
    Tensor v = x.view();
    with_cpu_generator(gen, [&](at::Generator& g) { fn(v, g); });
  });
  return self;
}
}  // namespace

Tensor& normal_(simnpuStream_t s, Tensor& self, double mean, double std,
                std::optional<at::Generator> generator) {
  TORCH_CHECK(std >= 0.0, "simnpu::normal_: expects std >= 0.0, but found std ", std);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "simnpu::normal_: expected a floating point or complex tensor, got ",
              self.scalar_type());
  return random_kernel(s, "normal_", self, generator,
                       [mean, std](Tensor& v, at::Generator& g) { v.normal_(mean, std, g); });
}

Tensor& uniform_(simnpuStream_t s, Tensor& self, double from, double to,
                 std::optional<at::Generator> generator) {
  TORCH_CHECK(from <= to, "simnpu::uniform_: expects from <= to, got from=", from, " to=", to);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "simnpu::uniform_: expected a floating point or complex tensor, got ",
              self.scalar_type());
  return random_kernel(s, "uniform_", self, generator,
                       [from, to](Tensor& v, at::Generator& g) { v.uniform_(from, to, g); });
}

Tensor& random_(simnpuStream_t s, Tensor& self, std::optional<at::Generator> generator) {
  return random_kernel(s, "random_", self, generator, [](Tensor& v, at::Generator& g) { v.random_(g); });
}

Tensor& random_from(simnpuStream_t s, Tensor& self, int64_t from, std::optional<int64_t> to,
                    std::optional<at::Generator> generator) {
  TORCH_CHECK(!to || from < *to, "simnpu::random_: expects from < to, got from=", from, " to=", *to);
  return random_kernel(s, "random_from", self, generator,
                       [from, to](Tensor& v, at::Generator& g) { v.random_(from, to, g); });
}

Tensor& random_to(simnpuStream_t s, Tensor& self, int64_t to, std::optional<at::Generator> generator) {
  TORCH_CHECK(to > 0, "simnpu::random_: expects to > 0, got to=", to);
  return random_kernel(s, "random_to", self, generator,
                       [to](Tensor& v, at::Generator& g) { v.random_(to, g); });
}

Tensor& randperm_out(simnpuStream_t s, int64_t n, std::optional<at::Generator> generator, Tensor& out) {
  TORCH_CHECK(n >= 0, "simnpu::randperm: n must be non-negative, got ", n);
  check_devices("randperm_out", {&out}, false);
  if (out.numel() != n || out.dim() != 1) out.resize_({n});
  return random_kernel(s, "randperm_out", out, generator,
                       [n](Tensor& v, at::Generator& g) { at::randperm_out(v, n, g); });
}

}  // namespace simnpu::ops
