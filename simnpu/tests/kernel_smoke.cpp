// Standalone smoke test of libsimnpu_kernels: a minimal PrivateUse1 shim
// (allocator on simnpuMalloc, empty/empty_strided) so kernels can allocate,
// then every kernel is compared against ATen CPU. Build with
// -DSIMNPU_BUILD_TESTS=ON; run build/kernel_smoke. Not the real backend.
#include <simnpu/simnpu_kernels.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <cstdio>
#include <iostream>

using at::Tensor;
namespace ops = simnpu::ops;

namespace {
#define CHECK_RT(x) TORCH_CHECK((x) == simnpuSuccess, #x, " failed: ", simnpuGetLastErrorMessage())

void del(void* p) { simnpuFree(p); }
struct Alloc final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    int d = 0;
    simnpuGetDevice(&d);
    void* p = nullptr;
    CHECK_RT(simnpuMalloc(&p, n));
    return {p, p, &del, c10::Device(c10::DeviceType::PrivateUse1, d)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &del; }
  void copy_data(void* dst, const void* src, size_t n) const override {
    CHECK_RT(simnpuMemcpy(dst, src, n, simnpuMemcpyDeviceToDevice));
  }
} g_alloc;

struct Guard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    int d = 0;
    simnpuGetDevice(&d);
    return c10::Device(c10::DeviceType::PrivateUse1, d);
  }
  void setDevice(c10::Device d) const override { simnpuSetDevice(d.index()); }
  void uncheckedSetDevice(c10::Device d) const noexcept override { simnpuSetDevice(d.index()); }
  c10::Stream getStream(c10::Device d) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override {
    int n = 0;
    simnpuGetDeviceCount(&n);
    return n;
  }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, Guard);

Tensor empty_mf(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout>,
                std::optional<at::Device> device, std::optional<bool>, std::optional<at::MemoryFormat> mf) {
  if (device && device->has_index()) simnpuSetDevice(device->index());
  return at::detail::empty_generic(size, &g_alloc, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), mf);
}
Tensor empty_st(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                std::optional<at::Layout>, std::optional<at::Device> device, std::optional<bool>) {
  if (device && device->has_index()) simnpuSetDevice(device->index());
  return at::detail::empty_strided_generic(size, stride, &g_alloc,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_mf);
  m.impl("empty_strided", empty_st);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
}

const at::Device kDev(c10::DeviceType::PrivateUse1, 0);

Tensor to_dev(const Tensor& cpu) {
  Tensor c = cpu.contiguous();
  Tensor d = at::empty(c.sizes(), c.options().device(kDev));
  CHECK_RT(simnpuMemcpy(d.data_ptr(), c.data_ptr(), c.nbytes(), simnpuMemcpyHostToDevice));
  return d;
}
Tensor to_cpu(const Tensor& d) {
  if (!d.defined()) return d;
  simnpuError_t e = simnpuDeviceSynchronize();
  TORCH_CHECK(e == simnpuSuccess, "device error: ", simnpuGetLastErrorMessage());
  TORCH_CHECK(d.is_non_overlapping_and_dense());
  Tensor c = at::empty_strided(d.sizes(), d.strides(), d.options().device(at::kCPU));
  CHECK_RT(simnpuMemcpy(c.data_ptr(), d.data_ptr(), d.nbytes(), simnpuMemcpyDeviceToHost));
  return c;
}

int failures = 0, passes = 0;
void expect(const char* what, const Tensor& got_dev, const Tensor& want, double tol = 1e-5) {
  Tensor got = got_dev.device().is_cpu() ? got_dev : to_cpu(got_dev);
  bool ok = got.sizes() == want.sizes() && got.scalar_type() == want.scalar_type() &&
            (want.is_floating_point() ? at::allclose(got, want, tol, tol) : at::equal(got, want));
  if (ok) {
    ++passes;
  } else {
    ++failures;
    std::cerr << "FAIL " << what << ": got " << got.sizes() << " " << got.scalar_type() << " want "
              << want.sizes() << " " << want.scalar_type() << "\n";
  }
}
}  // namespace

int main() {
  simnpuStream_t S = nullptr;  // default stream
  at::manual_seed(0);
  Tensor a = at::randn({4, 5}), b = at::randn({5}), ai = at::randint(0, 10, {4, 5}, at::kInt);
  Tensor da = to_dev(a), db = to_dev(b), dai = to_dev(ai);
  expect("add", ops::add(S, da, db, 2), at::add(a, b, 2));
  expect("add int+float promote", ops::add(S, dai, db, 1), at::add(ai, b));
  Tensor wrapped = at::scalar_tensor(3);  // 0-dim CPU wrapped number
  wrapped.unsafeGetTensorImpl()->set_wrapped_number(true);
  expect("mul wrapped scalar", ops::mul(S, dai, wrapped), at::mul(ai, wrapped));
  expect("div int/int", ops::div(S, dai, to_dev(ai + 1)), at::div(ai, ai + 1));
  expect("sub", ops::sub(S, da, db, 1), a - b);
  Tensor dc = to_dev(a);
  ops::add_(S, dc, db, 1);
  ops::mul_(S, dc, wrapped);
  ops::div_(S, dc, to_dev(b.abs() + 1));
  ops::sub_(S, dc, dc, 0.5);
  Tensor want_c = ((a + b) * 3) / (b.abs() + 1);
  expect("inplace chain", dc, want_c - 0.5 * want_c);
  Tensor dt = to_dev(a).t();  // strided in-place
  ops::add_(S, dt, to_dev(at::ones({5, 4})), 1);
  expect("strided inplace", dt, a.t() + 1);
  expect("relu", ops::relu(S, da), at::relu(a));
  Tensor dr = to_dev(a);
  ops::relu_(S, dr);
  expect("relu_", dr, at::relu(a));
  expect("threshold_backward", ops::threshold_backward(S, db, db, 0), at::threshold_backward(b, b, 0));
  bool threw = false;
  try {
    ops::add_(S, db, da, 1);  // broadcasting into a smaller self
  } catch (const c10::Error&) {
    threw = true;
  }
  expect("add_ shape check throws", at::scalar_tensor(threw), at::scalar_tensor(true));

  Tensor m1 = at::randn({3, 4}), m2 = at::randn({4, 6}), bias = at::randn({6});
  expect("mm", ops::mm(S, to_dev(m1), to_dev(m2)), at::mm(m1, m2), 1e-4);
  expect("addmm", ops::addmm(S, to_dev(bias), to_dev(m1), to_dev(m2), 0.5, 2), at::addmm(bias, m1, m2, 0.5, 2), 1e-4);

  Tensor x = at::randn({2, 3, 8, 8}), w = at::randn({4, 3, 3, 3}), cb = at::randn({4});
  Tensor dx = to_dev(x), dw = to_dev(w);
  auto y = at::convolution(x, w, cb, {2, 2}, {1, 1}, {1, 1}, false, {0, 0}, 1);
  Tensor dy = ops::convolution(S, dx, dw, to_dev(cb), {2, 2}, {1, 1}, {1, 1}, false, {0, 0}, 1);
  expect("convolution", dy, y, 1e-4);
  Tensor wt = at::randn({3, 2, 3, 3});
  expect("conv transposed", ops::convolution(S, dx, to_dev(wt), std::nullopt, {2}, {1}, {1}, true, {1}, 1),
         at::convolution(x, wt, std::nullopt, {2, 2}, {1, 1}, {1, 1}, true, {1, 1}, 1), 1e-4);
  Tensor go = at::randn_like(y);
  std::vector<int64_t> bsz{4};
  auto gr = at::convolution_backward(go, x, w, bsz, {2, 2}, {1, 1}, {1, 1}, false, {0, 0}, 1, {true, true, true});
  auto dgr = ops::convolution_backward(S, to_dev(go), dx, dw, bsz, {2, 2}, {1, 1}, {1, 1}, false, {0, 0}, 1,
                                       {true, true, true});
  expect("conv_bw gi", std::get<0>(dgr), std::get<0>(gr), 1e-4);
  expect("conv_bw gw", std::get<1>(dgr), std::get<1>(gr), 1e-3);
  expect("conv_bw gb", std::get<2>(dgr), std::get<2>(gr), 1e-4);

  auto mp = at::max_pool2d_with_indices(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
  auto dmp = ops::max_pool2d_with_indices(S, dx, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
  expect("maxpool out", std::get<0>(dmp), std::get<0>(mp));
  expect("maxpool idx", std::get<1>(dmp), std::get<1>(mp));
  Tensor gmp = at::randn_like(std::get<0>(mp));
  expect("maxpool bw",
         ops::max_pool2d_with_indices_backward(S, to_dev(gmp), dx, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false,
                                               std::get<1>(dmp)),
         at::max_pool2d_with_indices_backward(gmp, x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, std::get<1>(mp)));
  expect("adaptive avg", ops::adaptive_avg_pool2d(S, dx, {1, 1}), at::_adaptive_avg_pool2d(x, {1, 1}));
  Tensor gap = at::randn({2, 3, 1, 1});
  expect("adaptive avg bw", ops::adaptive_avg_pool2d_backward(S, to_dev(gap), dx),
         at::_adaptive_avg_pool2d_backward(gap, x));

  Tensor bw = at::rand({3}), bb = at::rand({3}), rm = at::zeros({3}), rv = at::ones({3});
  Tensor drm = to_dev(rm), drv = to_dev(rv);
  auto bn = at::native_batch_norm(x, bw, bb, rm, rv, true, 0.1, 1e-5);
  auto dbn = ops::batch_norm(S, dx, to_dev(bw), to_dev(bb), drm, drv, true, 0.1, 1e-5);
  expect("bn out", std::get<0>(dbn), std::get<0>(bn), 1e-4);
  expect("bn save_mean", std::get<1>(dbn), std::get<1>(bn), 1e-4);
  expect("bn save_invstd", std::get<2>(dbn), std::get<2>(bn), 1e-4);
  expect("bn running_mean updated", drm, rm, 1e-5);
  expect("bn running_var updated", drv, rv, 1e-5);
  auto bne = at::native_batch_norm(x, bw, bb, rm, rv, false, 0.1, 1e-5);
  auto dbne = ops::batch_norm(S, dx, to_dev(bw), to_dev(bb), drm, drv, false, 0.1, 1e-5);
  expect("bn eval", std::get<0>(dbne), std::get<0>(bne), 1e-4);
  expect("bn eval save_mean size", std::get<1>(dbne), std::get<1>(bne));
  Tensor gbn = at::randn_like(x);
  auto bnb = at::native_batch_norm_backward(gbn, x, bw, rm, rv, std::get<1>(bn), std::get<2>(bn), true, 1e-5,
                                            {true, true, true});
  auto dbnb = ops::batch_norm_backward(S, to_dev(gbn), dx, to_dev(bw), drm, drv, std::get<1>(dbn), std::get<2>(dbn),
                                       true, 1e-5, {true, true, true});
  expect("bn bw gi", std::get<0>(dbnb), std::get<0>(bnb), 1e-4);
  expect("bn bw gw", std::get<1>(dbnb), std::get<1>(bnb), 1e-4);
  expect("bn bw gb", std::get<2>(dbnb), std::get<2>(bnb), 1e-4);

  Tensor logits = at::randn({6, 10}), tgt = at::randint(0, 10, {6}, at::kLong);
  Tensor ls = at::_log_softmax(logits, 1, false);
  Tensor dls = ops::log_softmax(S, to_dev(logits), 1, false);
  expect("log_softmax", dls, ls);
  auto nll = at::nll_loss_forward(ls, tgt, {}, 1, -100);
  auto dnll = ops::nll_loss_forward(S, dls, to_dev(tgt), std::nullopt, 1, -100);
  expect("nll out", std::get<0>(dnll), std::get<0>(nll));
  expect("nll tw", std::get<1>(dnll), std::get<1>(nll));
  Tensor g1 = at::ones({});
  Tensor gnll = at::nll_loss_backward(g1, ls, tgt, {}, 1, -100, std::get<1>(nll));
  Tensor dgnll = ops::nll_loss_backward(S, to_dev(g1), dls, to_dev(tgt), std::nullopt, 1, -100, std::get<1>(dnll));
  expect("nll bw", dgnll, gnll);
  expect("log_softmax bw", ops::log_softmax_backward(S, dgnll, dls, 1, at::kFloat),
         at::_log_softmax_backward_data(gnll, ls, 1, at::kFloat));

  expect("sum dim", ops::sum(S, dx, std::vector<int64_t>{1, 2}, true, std::nullopt), x.sum({1, 2}, true), 1e-4);
  expect("sum all", ops::sum(S, dai, std::nullopt, false, std::nullopt), ai.sum());
  expect("mean", ops::mean(S, dx, std::vector<int64_t>{0}, false, at::kDouble), x.mean({0}, false, at::kDouble));
  Tensor df = to_dev(a);
  ops::fill_(S, df, 2.5);
  expect("fill_", df, at::full({4, 5}, 2.5));
  ops::zero_(S, df);
  expect("zero_", df, at::zeros({4, 5}));
  Tensor dd = at::empty({4, 5}, at::TensorOptions().dtype(at::kDouble).device(kDev));
  ops::copy_(S, dd, da.t().t(), false);
  expect("copy_ dtype", dd, a.to(at::kDouble));
  Tensor dsq = to_dev(at::arange(9, at::kFloat).view({3, 3}));
  ops::copy_(S, dsq, dsq.t(), false);  // overlapping src
  expect("copy_ alias", dsq, at::arange(9, at::kFloat).view({3, 3}).t().contiguous());
  Tensor dbc = at::empty({4, 5}, da.options());
  ops::copy_(S, dbc, db, false);
  expect("copy_ broadcast", dbc, b.expand({4, 5}));
  std::vector<Tensor> cl{da, to_dev(a * 2)};
  expect("cat", ops::cat(S, at::ITensorListRef(cl), 0), at::cat({a, a * 2}, 0));

  auto cg = at::make_generator<at::CPUGeneratorImpl>(42);
  auto cg2 = at::make_generator<at::CPUGeneratorImpl>(42);
  Tensor dn = at::empty({100}, da.options());
  ops::normal_(S, dn, 1, 2, cg);
  expect("normal_ cpu gen", dn, at::empty({100}).normal_(1, 2, cg2));
  ops::uniform_(S, dn, -1, 1, cg);
  expect("uniform_", dn, at::empty({100}).uniform_(-1, 1, cg2));
  Tensor dri = at::empty({50}, dai.options());
  ops::random_from(S, dri, 3, 9, cg);
  expect("random_from", dri, at::empty({50}, at::kInt).random_(3, 9, cg2));
  ops::random_to(S, dri, 5, cg);
  expect("random_to", dri, at::empty({50}, at::kInt).random_(5, cg2));
  ops::random_(S, dri, cg);
  expect("random_", dri, at::empty({50}, at::kInt).random_(cg2));
  Tensor dp = at::empty({20}, at::TensorOptions().dtype(at::kLong).device(kDev));
  ops::randperm_out(S, 20, cg, dp);
  expect("randperm", dp, at::randperm(20, cg2));

  // failure inside a kernel: sticky launch failure with the ATen message
  Tensor bad = to_dev(at::randint(10, 20, {6}, at::kLong));  // targets out of range
  ops::nll_loss_forward(S, dls, bad, std::nullopt, 1, -100);
  simnpuError_t e = simnpuDeviceSynchronize();
  std::string msg = simnpuGetLastErrorMessage();
  expect("kernel failure sticky", at::scalar_tensor((int64_t)e), at::scalar_tensor((int64_t)simnpuErrorLaunchFailure));
  expect("kernel failure message", at::scalar_tensor(msg.find("nll_loss_forward") != std::string::npos),
         at::scalar_tensor(true));
  expect("error cleared", at::scalar_tensor((int64_t)simnpuDeviceSynchronize()), at::scalar_tensor((int64_t)0));

  std::printf("kernel_smoke: %d passed, %d failed\n", passes, failures);
  return failures ? 1 : 0;
}
