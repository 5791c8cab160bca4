// Host time of each piece of one `nvgpu` vendor call, against CUDA's own call of the same
// op (bench/vendor_call_parts.py builds and runs it on a CUDA machine). A diagnostic: the
// profiler shows a vendor call costing a few microseconds over CUDA's, and only timing the
// pieces in C++, with no profiler and no Python around them, says which piece that is.
#include <torch/extension.h>

#include <ATen/ops/_fused_sdp_choice_cuda_dispatch.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <ATen/ops/mm_cuda_dispatch.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <nvgpu/nvgpu_kernels.h>
#include <torch_fl/core_ops.h>
#include <torch_fl/driver.h>
#include <torch_fl/streams.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr c10::DeviceType kChip = c10::DeviceType::PrivateUse1;

// Nanoseconds a call: the least of `repeats` timed blocks of `calls` calls. The device is
// synchronized between blocks, outside the timing, so the launch queue never fills.
double per_call_ns(const std::function<void()>& call, int calls, int repeats) {
  for (int i = 0; i < 100; ++i) call();
  C10_CUDA_CHECK(cudaDeviceSynchronize());
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, ns / calls);
    C10_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return best;
}

// As nvgpu_kernels.cpp makes them (kept in step by hand: a diagnostic, not a second
// implementation anything runs on).
at::Tensor cuda_view(const at::Tensor& t) {
  const c10::Device device(c10::DeviceType::CUDA, t.device().index());
  const c10::Storage& owner = t.storage();
  c10::Storage view(c10::Storage::use_byte_size_t(), owner.nbytes(), c10::DataPtr(owner.mutable_data(), device),
                    nullptr, false);
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(std::move(view), c10::DispatchKeySet(c10::DispatchKey::CUDA),
                                                            t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return out;
}

void release_storage(void* context) { c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(context)); }

at::Tensor adopt(const at::Tensor& t) {
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(impl);
  c10::DataPtr data(impl->mutable_data(), impl, &release_storage, c10::Device(kChip, t.device().index()));
  c10::Storage storage(c10::Storage::use_byte_size_t(), impl->nbytes(), std::move(data), c10::GetAllocator(kChip),
                       true);
  at::Tensor out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage),
                                                            c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return out;
}

}  // namespace

// (name, nanoseconds a call) for each piece, chip tensors `a`, `b` and CUDA tensors `ca`,
// `cb` of the same values.
std::vector<std::pair<std::string, double>> parts(const at::Tensor& a, const at::Tensor& b, const at::Tensor& ca,
                                                  const at::Tensor& cb, int64_t calls, int64_t repeats) {
  TORCH_CHECK(a.device().type() == kChip && ca.is_cuda(), "expected chip tensors, then CUDA tensors");
  const int n = static_cast<int>(calls), r = static_cast<int>(repeats);
  std::vector<std::pair<std::string, double>> out;
  auto time = [&](std::string name, const std::function<void()>& call) { out.emplace_back(std::move(name), per_call_ns(call, n, r)); };
  const c10::DispatchKeySet chip_key(c10::DispatchKey::PrivateUse1), cuda_key(c10::DispatchKey::CUDA);
  const cudaStream_t stream = torch_fl::StreamArg::current();

  // Whole calls, from the top of the dispatcher (autograd on: `a` requires no grad, as in a loop
  // under no_grad the autograd kernel still runs), then from the backend key, then no dispatcher.
  time("mm: at::mm, cuda", [&] { (void)at::mm(ca, cb); });
  time("mm: at::mm, nvgpu", [&] { (void)at::mm(a, b); });
  time("mm: backend key only, cuda", [&] { (void)at::_ops::mm::redispatch(cuda_key, ca, cb); });
  time("mm: backend key only, nvgpu (the generated wrapper)", [&] { (void)at::_ops::mm::redispatch(chip_key, a, b); });
  time("mm: at::cuda::mm, no dispatcher", [&] { (void)at::cuda::mm(ca, cb); });
  time("mm: nvgpu::ops::mm, no wrapper", [&] { (void)nvgpu::ops::mm(stream, a, b); });
  time("softmax: at::_softmax, cuda", [&] { (void)at::_softmax(ca, -1, false); });
  time("softmax: at::_softmax, nvgpu", [&] { (void)at::_softmax(a, -1, false); });
  time("softmax: at::cuda::_softmax, no dispatcher", [&] { (void)at::cuda::_softmax(ca, -1, false); });
  time("softmax: nvgpu::ops::softmax, no wrapper", [&] { (void)nvgpu::ops::softmax(stream, a, -1, false); });
  time("to bfloat16: cuda", [&] { (void)ca.to(at::kBFloat16); });
  time("to bfloat16: nvgpu", [&] { (void)a.to(at::kBFloat16); });
  at::Tensor half = at::empty({16, 16}, a.options().dtype(at::kBFloat16));
  at::Tensor chalf = at::empty({16, 16}, ca.options().dtype(at::kBFloat16));
  time("copy_ to bfloat16: cuda (copy_)", [&] { chalf.copy_(ca); });
  time("copy_ to bfloat16: nvgpu (copy_, then the runtime's _copy_from)", [&] { half.copy_(a); });
  time("copy_ to bfloat16: nvgpu, at::_copy_from", [&] { (void)at::_copy_from(a, half, false); });
  time("copy_ to bfloat16: nvgpu::ops::copy_, no wrapper", [&] { (void)nvgpu::ops::copy_(stream, half, a, false); });
  time("empty 16x16: cuda", [&] { (void)at::empty({16, 16}, ca.options()); });
  time("empty 16x16: nvgpu", [&] { (void)at::empty({16, 16}, a.options()); });

  // Attention (causal, [1, 2, 16, 16]): the kernel choice is a dispatched op on the chip, a
  // direct call on CUDA.
  const at::Tensor q = a.view({1, 2, 8, 16}), cq = ca.view({1, 2, 8, 16});
  time("sdpa: at::scaled_dot_product_attention, cuda",
       [&] { (void)at::scaled_dot_product_attention(cq, cq, cq, {}, 0.0, true); });
  time("sdpa: at::scaled_dot_product_attention, nvgpu",
       [&] { (void)at::scaled_dot_product_attention(q, q, q, {}, 0.0, true); });
  time("sdpa choice: at::cuda::_fused_sdp_choice, no dispatcher",
       [&] { (void)at::cuda::_fused_sdp_choice(cq, cq, cq, {}, 0.0, true, {}, false); });
  time("sdpa choice: at::_fused_sdp_choice, nvgpu (dispatched)",
       [&] { (void)at::_fused_sdp_choice(q, q, q, {}, 0.0, true, {}, false); });
  time("sdpa choice: backend key only, nvgpu (the generated wrapper)", [&] {
    (void)at::_ops::_fused_sdp_choice::redispatch(chip_key, q, q, q, {}, 0.0, true, {}, false);
  });
  time("sdpa choice: nvgpu::ops::fused_sdp_choice, no wrapper",
       [&] { (void)nvgpu::ops::fused_sdp_choice(stream, q, q, q, {}, 0.0, true, {}, false); });
  time("sdpa: at::_scaled_dot_product_efficient_attention, cuda",
       [&] { (void)at::_scaled_dot_product_efficient_attention(cq, cq, cq, {}, false, 0.0, true); });
  time("sdpa: at::_scaled_dot_product_efficient_attention, nvgpu",
       [&] { (void)at::_scaled_dot_product_efficient_attention(q, q, q, {}, false, 0.0, true); });

  // The generated wrapper's pieces.
  time("wrapper: StreamArg::current()", [&] {
    volatile void* h = torch_fl::StreamArg::current().handle;
    (void)h;
  });
  time("wrapper: OptionalDeviceGuard(kernel_device(a, b))",
       [&] { const c10::OptionalDeviceGuard guard(torch_fl::kernel_device(a, b)); });
  time("wrapper: resolve_math_bits x2", [&] {
    (void)torch_fl::resolve_math_bits(a);
    (void)torch_fl::resolve_math_bits(b);
  });
  time("runtime: current_device() (driver get_device)", [&] {
    volatile auto d = torch_fl::current_device();
    (void)d;
  });
  time("runtime: current_stream(-1)", [&] { (void)torch_fl::current_stream(-1); });

  // nvgpu's kernel pieces: the CUDA stream made current, autocast excluded, the CUDA views,
  // the result adopted.
  time("kernel: c10::cuda::current_device()", [&] {
    volatile auto d = c10::cuda::current_device();
    (void)d;
  });
  time("kernel: CUDAStreamGuard(getStreamFromExternal)", [&] {
    const c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromExternal(stream, c10::cuda::current_device()));
  });
  time("kernel: ExcludeDispatchKeyGuard(autocast)",
       [&] { const c10::impl::ExcludeDispatchKeyGuard guard(c10::autocast_dispatch_keyset); });
  time("kernel: cudaGetLastError", [&] { (void)cudaGetLastError(); });
  time("kernel: CUDA views of a and b", [&] {
    (void)cuda_view(a);
    (void)cuda_view(b);
  });
  const at::Tensor result = at::cuda::mm(ca, cb);
  time("kernel: result adopted (and freed)", [&] { (void)adopt(result); });
  time("kernel: at::cuda::mm on CUDA views", [&] { (void)at::cuda::mm(cuda_view(a), cuda_view(b)); });
  time("kernel: at::cuda::mm on the chip's stream", [&] {
    const c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromExternal(stream, c10::cuda::current_device()));
    (void)at::cuda::mm(ca, cb);
  });
  return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("parts", &parts); }
