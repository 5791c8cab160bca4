// The `nvgpu` vendor kernels: ATen CUDA on the chip's memory (see nvgpu_kernels.h).
#include <nvgpu/nvgpu_kernels.h>

#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/native/Resize.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
// The CUDA kernels called directly (at::cuda::*), not through the dispatcher a second time:
// the chip's call was dispatched already, and a second dispatch is host time on every call.
#include <ATen/ops/_adaptive_avg_pool2d_backward_cuda_dispatch.h>
#include <ATen/ops/_adaptive_avg_pool2d_cuda_dispatch.h>
#include <ATen/ops/_fused_sdp_choice_cuda_dispatch.h>
#include <ATen/ops/_log_softmax_backward_data_cuda_dispatch.h>
#include <ATen/ops/_log_softmax_cuda_dispatch.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention_backward_cuda_dispatch.h>
#include <ATen/ops/_scaled_dot_product_efficient_attention_cuda_dispatch.h>
#include <ATen/ops/_softmax_backward_data_cuda_dispatch.h>
#include <ATen/ops/_softmax_cuda_dispatch.h>
#include <ATen/ops/addmm_cuda_dispatch.h>
#include <ATen/ops/baddbmm_cuda_dispatch.h>
#include <ATen/ops/bmm_cuda_dispatch.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/embedding_dense_backward_cuda_dispatch.h>
#include <ATen/ops/index_select_cuda_dispatch.h>
#include <ATen/ops/max_pool2d_with_indices_backward_cuda_dispatch.h>
#include <ATen/ops/max_pool2d_with_indices_cuda_dispatch.h>
#include <ATen/ops/mm_cuda_dispatch.h>
#include <ATen/ops/nll_loss_backward_cuda_dispatch.h>
#include <ATen/ops/nll_loss_forward_cuda_dispatch.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch_fl/rng.h>

#include <mutex>
#include <unordered_map>

namespace nvgpu::ops {

namespace {

constexpr c10::DeviceType kChip = c10::DeviceType::PrivateUse1;

// For the call: torch.cuda's current stream is the chip's stream (same device),
// and autocast does not re-enter (the chip's own autocast already ran above us).
class OnChipStream {
 public:
  explicit OnChipStream(cudaStream_t stream)
      : guard_(c10::cuda::getStreamFromExternal(stream, c10::cuda::current_device())),
        no_autocast_(c10::autocast_dispatch_keyset) {
    // The chip's own driver calls report failures by status (e.g. a cudaMalloc the
    // caching allocator answered with OutOfMemoryError), but the CUDA runtime also
    // keeps them as its "last error", which ATen's launch checks would raise now.
    (void)cudaGetLastError();
  }

 private:
  c10::cuda::CUDAStreamGuard guard_;
  c10::impl::ExcludeDispatchKeyGuard no_autocast_;
};

// A CUDA tensor on the same memory as an `nvgpu` tensor (it does not own it: the
// caller holds the `nvgpu` tensor for the duration of the call, and the chip's
// allocator reuses freed memory in stream order). Other tensors (CPU scalars,
// undefined) pass through. Made directly rather than through at::from_blob, whose
// checks cost host time on every call of every kernel here.
Tensor cuda(const Tensor& t) {
  if (!t.defined() || t.device().type() != kChip) return t;
  const c10::Device device(c10::DeviceType::CUDA, t.device().index());
  const c10::Storage& owner = t.storage();
  c10::Storage view(c10::Storage::use_byte_size_t(), owner.nbytes(), c10::DataPtr(owner.mutable_data(), device),
                    /*allocator=*/nullptr, /*resizable=*/false);
  Tensor out = at::detail::make_tensor<c10::TensorImpl>(std::move(view), c10::DispatchKeySet(c10::DispatchKey::CUDA),
                                                        t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return out;
}

std::optional<Tensor> cuda(const std::optional<Tensor>& t) {
  if (!t.has_value()) return t;
  return cuda(*t);
}

void release_storage(void* context) {
  c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(context));
}

// The `nvgpu` tensor on the memory of a CUDA tensor an ATen op just made: its
// storage keeps the CUDA storage alive and frees it to torch's CUDA allocator.
Tensor chip(const Tensor& t) {
  if (!t.defined() || !t.is_cuda()) return t;
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  // A view of an argument (non-owning, made by `cuda` above) must never be adopted.
  TORCH_INTERNAL_ASSERT(impl->allocator() != nullptr, "nvgpu kernel returned a view of its argument");
  c10::raw::intrusive_ptr::incref(impl);
  c10::DataPtr data(impl->mutable_data(), impl, &release_storage, c10::Device(kChip, t.device().index()));
  c10::Storage storage(c10::Storage::use_byte_size_t(), impl->nbytes(), std::move(data),
                       c10::GetAllocator(kChip), /*resizable=*/true);
  Tensor out = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                        t.dtype());
  out.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return out;
}

template <class... T>
std::tuple<T...> chip(const std::tuple<T...>& ts) {
  return std::apply([](const auto&... t) { return std::make_tuple(chip(t)...); }, ts);
}

// The layout the chip promises for a convolution's outputs (torch_fl/conv_layout.py, which
// tells torch's tracing so): cuDNN's rule for 2-d convolutions, channels-last when the input
// or the weight is; contiguous otherwise. torch's other CUDA convolutions (depthwise,
// dilated, 64-bit indexed) return contiguous, and cuDNN a 3-d one channels-last-3d.
at::MemoryFormat conv_memory_format(const Tensor& input, const Tensor& weight) {
  const auto last = at::MemoryFormat::ChannelsLast;
  return input.dim() == 4 && (input.suggest_memory_format() == last || weight.suggest_memory_format() == last)
             ? last : at::MemoryFormat::Contiguous;
}

Tensor laid_out(const Tensor& t, at::MemoryFormat format) {
  return !t.defined() || t.is_contiguous(format) ? t : t.contiguous(format);
}
}  // namespace

Tensor mm(cudaStream_t stream, const Tensor& self, const Tensor& mat2) {
  OnChipStream on(stream);
  return chip(at::cuda::mm(cuda(self), cuda(mat2)));
}

Tensor addmm(cudaStream_t stream, const Tensor& self, const Tensor& mat1, const Tensor& mat2,
             const at::Scalar& beta, const at::Scalar& alpha) {
  OnChipStream on(stream);
  return chip(at::cuda::addmm(cuda(self), cuda(mat1), cuda(mat2), beta, alpha));
}

Tensor bmm(cudaStream_t stream, const Tensor& self, const Tensor& mat2) {
  OnChipStream on(stream);
  return chip(at::cuda::bmm(cuda(self), cuda(mat2)));
}

Tensor baddbmm(cudaStream_t stream, const Tensor& self, const Tensor& batch1, const Tensor& batch2,
               const at::Scalar& beta, const at::Scalar& alpha) {
  OnChipStream on(stream);
  return chip(at::cuda::baddbmm(cuda(self), cuda(batch1), cuda(batch2), beta, alpha));
}

// The out= and in-place forms: torch.compile's graphs call these (Inductor's extern
// `mm(a, b, out=buf)`), which would otherwise take the chain (Triton's matmul). `out` is
// resized on the chip, where its storage lives; cuBLAS then writes into a view of it.
namespace {
template <class Compute>
Tensor& into(cudaStream_t stream, Tensor& out, at::IntArrayRef sizes, Compute compute) {
  at::native::resize_output(out, sizes);
  OnChipStream on(stream);
  Tensor view = cuda(out);
  compute(view);
  return out;
}
}  // namespace

Tensor& mm_out(cudaStream_t stream, const Tensor& self, const Tensor& mat2, Tensor& out) {
  TORCH_CHECK(self.dim() == 2 && mat2.dim() == 2, "mm: expected 2-D matrices, got ", self.dim(), "-D and ",
              mat2.dim(), "-D");
  return into(stream, out, {self.size(0), mat2.size(1)},
              [&](Tensor& view) { at::cuda::mm_out(view, cuda(self), cuda(mat2)); });
}

Tensor& addmm_out(cudaStream_t stream, const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                  const at::Scalar& beta, const at::Scalar& alpha, Tensor& out) {
  TORCH_CHECK(mat1.dim() == 2 && mat2.dim() == 2, "addmm: expected 2-D matrices, got ", mat1.dim(), "-D and ",
              mat2.dim(), "-D");
  return into(stream, out, {mat1.size(0), mat2.size(1)},
              [&](Tensor& view) { at::cuda::addmm_out(view, cuda(self), cuda(mat1), cuda(mat2), beta, alpha); });
}

Tensor& bmm_out(cudaStream_t stream, const Tensor& self, const Tensor& mat2, Tensor& out) {
  TORCH_CHECK(self.dim() == 3 && mat2.dim() == 3, "bmm: expected 3-D tensors, got ", self.dim(), "-D and ",
              mat2.dim(), "-D");
  return into(stream, out, {self.size(0), self.size(1), mat2.size(2)},
              [&](Tensor& view) { at::cuda::bmm_out(view, cuda(self), cuda(mat2)); });
}

Tensor& baddbmm_out(cudaStream_t stream, const Tensor& self, const Tensor& batch1, const Tensor& batch2,
                    const at::Scalar& beta, const at::Scalar& alpha, Tensor& out) {
  TORCH_CHECK(batch1.dim() == 3 && batch2.dim() == 3, "baddbmm: expected 3-D tensors, got ", batch1.dim(),
              "-D and ", batch2.dim(), "-D");
  return into(stream, out, {batch1.size(0), batch1.size(1), batch2.size(2)}, [&](Tensor& view) {
    at::cuda::baddbmm_out(view, cuda(self), cuda(batch1), cuda(batch2), beta, alpha);
  });
}

Tensor& addmm_(cudaStream_t stream, Tensor& self, const Tensor& mat1, const Tensor& mat2, const at::Scalar& beta,
               const at::Scalar& alpha) {
  OnChipStream on(stream);
  Tensor view = cuda(self);
  at::cuda::addmm_(view, cuda(mat1), cuda(mat2), beta, alpha);
  return self;
}

Tensor& baddbmm_(cudaStream_t stream, Tensor& self, const Tensor& batch1, const Tensor& batch2,
                 const at::Scalar& beta, const at::Scalar& alpha) {
  OnChipStream on(stream);
  Tensor view = cuda(self);
  at::cuda::baddbmm_(view, cuda(batch1), cuda(batch2), beta, alpha);
  return self;
}

Tensor convolution(cudaStream_t stream, const Tensor& input, const Tensor& weight,
                   const std::optional<Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                   at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
                   int64_t groups) {
  OnChipStream on(stream);
  return chip(laid_out(at::convolution(cuda(input), cuda(weight), cuda(bias), stride, padding, dilation,
                                       transposed, output_padding, groups),
                       conv_memory_format(input, weight)));
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward(
    cudaStream_t stream, const Tensor& grad_output, const Tensor& input, const Tensor& weight,
    at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  OnChipStream on(stream);
  auto [grad_input, grad_weight, grad_bias] = at::convolution_backward(
      cuda(grad_output), cuda(input), cuda(weight), bias_sizes, stride, padding, dilation, transposed,
      output_padding, groups, output_mask);
  const auto format = conv_memory_format(input, weight);
  return chip(std::make_tuple(laid_out(grad_input, format), laid_out(grad_weight, format), grad_bias));
}

namespace {

// cuDNN batch norm, as torch.cuda picks it (`_batch_norm_impl_index` chooses by
// `input.is_cuda()`, so the chip's own `native_batch_norm` would otherwise get ATen's
// native CUDA kernels: 16 of ResNet-50's 37 ms of GPU time, bench/ANALYSIS.md). cuDNN's
// backward needs the forward's reserve space, which native_batch_norm's three outputs
// cannot carry: the forward keeps it here, keyed by the address of the saved mean it
// returns, and the backward given that saved mean takes it. Saved means whose storage
// died (a forward without backward, e.g. under no_grad) are dropped on a later insert;
// a backward that finds nothing runs ATen's native backward, which takes cuDNN's saved
// mean and inverse standard deviation as its own (the same quantities).
struct CudnnForward {
  c10::weak_intrusive_ptr<c10::StorageImpl> mean;  // identifies the forward
  Tensor reserve;
};
std::mutex cudnn_forwards_mutex;
std::unordered_map<const void*, CudnnForward> cudnn_forwards;

void remember_cudnn_forward(const Tensor& save_mean, const Tensor& reserve) {
  std::lock_guard<std::mutex> lock(cudnn_forwards_mutex);
  if (cudnn_forwards.size() >= 64) {  // a few dozen layers' forwards await their backward
    for (auto it = cudnn_forwards.begin(); it != cudnn_forwards.end();) {
      it = it->second.mean.expired() ? cudnn_forwards.erase(it) : std::next(it);
    }
  }
  cudnn_forwards.insert_or_assign(save_mean.data_ptr(),
                                  CudnnForward{save_mean.storage().getWeakStorageImpl(), reserve});
}

std::optional<Tensor> take_cudnn_reserve(const Tensor& save_mean) {
  std::lock_guard<std::mutex> lock(cudnn_forwards_mutex);
  auto it = cudnn_forwards.find(save_mean.data_ptr());
  if (it == cudnn_forwards.end()) return std::nullopt;
  auto alive = it->second.mean.lock();
  Tensor reserve = std::move(it->second.reserve);
  cudnn_forwards.erase(it);
  // The entry is this forward's only while its saved mean's storage is the one kept alive
  // by `save_mean` (chip() adopted it), not a later allocation at the same address.
  if (!alive || alive->data() != save_mean.storage().data()) return std::nullopt;
  return reserve;
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> batch_norm(
    cudaStream_t stream, const Tensor& input, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& bias, const std::optional<Tensor>& running_mean,
    const std::optional<Tensor>& running_var, bool training, double momentum, double eps) {
  OnChipStream on(stream);
  auto [out, save_mean, save_invstd, reserve, backend] =
      at::_batch_norm_impl_index(cuda(input), cuda(weight), cuda(bias), cuda(running_mean), cuda(running_var),
                                 training, momentum, eps, at::globalContext().userEnabledCuDNN());
  constexpr int64_t kCudnn = 1;  // _batch_norm_impl_index's backend index
  if (backend == kCudnn && training && save_mean.numel() > 0) remember_cudnn_forward(save_mean, reserve);
  return chip(std::make_tuple(out, save_mean, save_invstd));
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(
    cudaStream_t stream, const Tensor& grad_out, const Tensor& input,
    const std::optional<Tensor>& weight, const std::optional<Tensor>& running_mean,
    const std::optional<Tensor>& running_var, const std::optional<Tensor>& save_mean,
    const std::optional<Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask) {
  OnChipStream on(stream);
  std::optional<Tensor> reserve;
  if (train && weight.has_value() && weight->defined() && save_mean.has_value() && save_mean->defined() &&
      save_mean->numel() > 0) {
    reserve = take_cudnn_reserve(*save_mean);
  }
  if (reserve.has_value()) {
    // cuDNN checks its input and weight are dense (ATen's own caller makes them so; the
    // autograd-saved input here may be a strided view); it densifies grad_out itself.
    Tensor in = cuda(input);
    in = in.contiguous(in.suggest_memory_format());
    auto grads = at::cudnn_batch_norm_backward(in, cuda(grad_out), cuda(*weight).contiguous(),
                                               cuda(running_mean), cuda(running_var), cuda(save_mean),
                                               cuda(save_invstd), eps, *reserve);
    // cuDNN computes all three; the op returns only those asked for.
    if (!output_mask[0]) std::get<0>(grads) = Tensor();
    if (!output_mask[1]) std::get<1>(grads) = Tensor();
    if (!output_mask[2]) std::get<2>(grads) = Tensor();
    return chip(grads);
  }
  return chip(at::native_batch_norm_backward(cuda(grad_out), cuda(input), cuda(weight), cuda(running_mean),
                                             cuda(running_var), cuda(save_mean), cuda(save_invstd), train, eps,
                                             output_mask));
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices(cudaStream_t stream, const Tensor& self,
                                                   at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                   at::IntArrayRef padding, at::IntArrayRef dilation,
                                                   bool ceil_mode) {
  OnChipStream on(stream);
  return chip(at::cuda::max_pool2d_with_indices(cuda(self), kernel_size, stride, padding, dilation, ceil_mode));
}

Tensor max_pool2d_with_indices_backward(cudaStream_t stream, const Tensor& grad_output,
                                        const Tensor& self, at::IntArrayRef kernel_size,
                                        at::IntArrayRef stride, at::IntArrayRef padding,
                                        at::IntArrayRef dilation, bool ceil_mode,
                                        const Tensor& indices) {
  OnChipStream on(stream);
  return chip(at::cuda::max_pool2d_with_indices_backward(cuda(grad_output), cuda(self), kernel_size, stride, padding,
                                                         dilation, ceil_mode, cuda(indices)));
}

Tensor adaptive_avg_pool2d(cudaStream_t stream, const Tensor& self, at::IntArrayRef output_size) {
  OnChipStream on(stream);
  return chip(at::cuda::_adaptive_avg_pool2d(cuda(self), output_size));
}

Tensor adaptive_avg_pool2d_backward(cudaStream_t stream, const Tensor& grad_output, const Tensor& self) {
  OnChipStream on(stream);
  return chip(at::cuda::_adaptive_avg_pool2d_backward(cuda(grad_output), cuda(self)));
}

Tensor softmax(cudaStream_t stream, const Tensor& self, int64_t dim, bool half_to_float) {
  OnChipStream on(stream);
  return chip(at::cuda::_softmax(cuda(self), dim, half_to_float));
}

Tensor softmax_backward(cudaStream_t stream, const Tensor& grad_output, const Tensor& output, int64_t dim,
                        at::ScalarType input_dtype) {
  OnChipStream on(stream);
  return chip(at::cuda::_softmax_backward_data(cuda(grad_output), cuda(output), dim, input_dtype));
}

Tensor log_softmax(cudaStream_t stream, const Tensor& self, int64_t dim, bool half_to_float) {
  OnChipStream on(stream);
  return chip(at::cuda::_log_softmax(cuda(self), dim, half_to_float));
}

Tensor log_softmax_backward(cudaStream_t stream, const Tensor& grad_output, const Tensor& output,
                            int64_t dim, at::ScalarType input_dtype) {
  OnChipStream on(stream);
  return chip(at::cuda::_log_softmax_backward_data(cuda(grad_output), cuda(output), dim, input_dtype));
}

std::tuple<Tensor, Tensor> nll_loss_forward(cudaStream_t stream, const Tensor& self, const Tensor& target,
                                            const std::optional<Tensor>& weight, int64_t reduction,
                                            int64_t ignore_index) {
  OnChipStream on(stream);
  return chip(at::cuda::nll_loss_forward(cuda(self), cuda(target), cuda(weight), reduction, ignore_index));
}

Tensor nll_loss_backward(cudaStream_t stream, const Tensor& grad_output, const Tensor& self,
                         const Tensor& target, const std::optional<Tensor>& weight, int64_t reduction,
                         int64_t ignore_index, const Tensor& total_weight) {
  OnChipStream on(stream);
  return chip(at::cuda::nll_loss_backward(cuda(grad_output), cuda(self), cuda(target), cuda(weight), reduction,
                                          ignore_index, cuda(total_weight)));
}

Tensor index_select(cudaStream_t stream, const Tensor& self, int64_t dim, const Tensor& index) {
  OnChipStream on(stream);
  return chip(at::cuda::index_select(cuda(self), dim, cuda(index)));
}

Tensor embedding_dense_backward(cudaStream_t stream, const Tensor& grad_output, const Tensor& indices,
                                int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq) {
  OnChipStream on(stream);
  return chip(at::cuda::embedding_dense_backward(cuda(grad_output), cuda(indices), num_weights, padding_idx,
                                                 scale_grad_by_freq));
}

int64_t fused_sdp_choice(cudaStream_t stream, const Tensor& query, const Tensor& key, const Tensor& value,
                         const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  OnChipStream on(stream);
  const auto choice = static_cast<sdp::SDPBackend>(at::cuda::_fused_sdp_choice(
      cuda(query), cuda(key), cuda(value), cuda(attn_mask), dropout_p, is_causal, scale, enable_gqa));
  const auto math = static_cast<int64_t>(sdp::SDPBackend::math);
  if (choice == sdp::SDPBackend::efficient_attention) return static_cast<int64_t>(choice);
  const bool cuda_only = choice == sdp::SDPBackend::flash_attention || choice == sdp::SDPBackend::cudnn_attention;
  if (!cuda_only || !at::globalContext().userEnabledMemEfficientSDP()) return math;
  // Flash and cuDNN attention (CUDA's first choices for half types; cuDNN's on Hopper) are CUDA's
  // alone in torch's composite: memory-efficient attention serves their calls, except where only
  // they can: grouped-query heads, and head sizes flash pads (not a multiple of 8).
  const bool same_heads = query.dim() == 4 && key.size(1) == query.size(1) && value.size(1) == query.size(1);
  const bool aligned = query.size(-1) % 8 == 0 && value.size(-1) % 8 == 0;
  return same_heads && aligned ? static_cast<int64_t>(sdp::SDPBackend::efficient_attention) : math;
}

namespace {

// Memory-efficient attention draws its dropout mask from CUDA's default generator. On the chip
// it must draw from the chip's (torch.nvgpu.manual_seed, get_rng_state and fork_rng govern it):
// for the call, CUDA's generator takes the chip generator's seed and Philox offset; then the
// chip's offset moves past the counters the kernel reserved, and CUDA's generator gets its own
// state back. (Another thread drawing from either generator meanwhile would interleave, as two
// threads drawing from one generator do.)
class DropoutFromChipGenerator {
 public:
  DropoutFromChipGenerator(c10::DeviceIndex device, bool draws) : draws_(draws) {
    if (!draws_) return;
    chip_ = torch_fl::default_generator(device);
    cuda_ = at::cuda::detail::getDefaultCUDAGenerator(device);
    uint64_t seed, offset;
    {
      std::lock_guard<std::mutex> lock(chip_.mutex());
      seed = chip_.current_seed();
      offset = chip_.get_offset();
    }
    offset = (offset + 3) / 4 * 4;  // CUDA's Philox offsets are multiples of 4
    std::lock_guard<std::mutex> lock(cuda_.mutex());
    auto* gen = at::check_generator<at::CUDAGeneratorImpl>(cuda_);
    saved_seed_ = gen->current_seed();
    saved_offset_ = gen->get_offset();
    gen->set_current_seed(seed);
    gen->set_offset(offset);
  }
  ~DropoutFromChipGenerator() {
    if (!draws_) return;
    uint64_t end;
    {
      std::lock_guard<std::mutex> lock(cuda_.mutex());
      auto* gen = at::check_generator<at::CUDAGeneratorImpl>(cuda_);
      end = gen->get_offset();
      gen->set_current_seed(saved_seed_);
      gen->set_offset(saved_offset_);
    }
    std::lock_guard<std::mutex> lock(chip_.mutex());
    chip_.set_offset(end);
  }
  DropoutFromChipGenerator(const DropoutFromChipGenerator&) = delete;
  DropoutFromChipGenerator& operator=(const DropoutFromChipGenerator&) = delete;

 private:
  bool draws_;
  at::Generator chip_, cuda_;
  uint64_t saved_seed_ = 0, saved_offset_ = 0;
};

}  // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor> efficient_attention(
    cudaStream_t stream, const Tensor& query, const Tensor& key, const Tensor& value,
    const std::optional<Tensor>& attn_bias, bool compute_log_sumexp, double dropout_p, bool is_causal,
    std::optional<double> scale) {
  OnChipStream on(stream);
  DropoutFromChipGenerator rng(query.device().index(), dropout_p > 0.0);
  return chip(at::cuda::_scaled_dot_product_efficient_attention(cuda(query), cuda(key), cuda(value), cuda(attn_bias),
                                                                 compute_log_sumexp, dropout_p, is_causal, scale));
}

std::tuple<Tensor, Tensor, Tensor, Tensor> efficient_attention_backward(
    cudaStream_t stream, const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value,
    const Tensor& attn_bias, const Tensor& out, const Tensor& logsumexp, const Tensor& philox_seed,
    const Tensor& philox_offset, double dropout_p, std::array<bool, 4> grad_input_mask, bool is_causal,
    std::optional<double> scale) {
  OnChipStream on(stream);
  // The mask is drawn again from the seed and offset the forward saved: no generator here.
  return chip(at::cuda::_scaled_dot_product_efficient_attention_backward(
      cuda(grad_out), cuda(query), cuda(key), cuda(value), cuda(attn_bias), cuda(out), cuda(logsumexp),
      cuda(philox_seed), cuda(philox_offset), dropout_p, grad_input_mask, is_causal, scale));
}

Tensor& copy_(cudaStream_t stream, Tensor& self, const Tensor& src, bool non_blocking) {
  OnChipStream on(stream);
  Tensor view = cuda(self);
  at::native::copy_(view, cuda(src), non_blocking);
  return self;
}

}  // namespace nvgpu::ops
