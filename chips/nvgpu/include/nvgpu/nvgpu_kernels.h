/*
 * nvgpu_kernels.h -- the `nvgpu` chip's vendor kernels: ATen CUDA (cuBLAS, cuDNN and
 * PyTorch's own CUDA kernels) run on the chip's memory.
 *
 * `nvgpu` describes an NVIDIA GPU as if it were a new chip: its driver hooks are
 * the CUDA runtime (specs/nvgpu.yaml), so an `nvgpu` tensor's memory is CUDA device
 * memory from the backend's caching allocator. A kernel here
 *  - views its `nvgpu` arguments as CUDA tensors on the same memory (no copy),
 *  - makes the chip's current stream (the first argument, a CUDA stream) torch.cuda's
 *    current stream for the call, so the ATen CUDA op is ordered with the chip's work,
 *  - returns the op's new tensors as `nvgpu` tensors on the same memory: their storage
 *    stays owned by torch's CUDA caching allocator (freed to it, stream-ordered on the
 *    stream it was allocated on), so `torch.nvgpu.memory_allocated()` does not count them.
 *
 * Signatures: the stream, then the aten op's dispatcher signature (non-SymInt), as
 * the generated backend calls every vendor kernel.
 */
#pragma once

#include <ATen/ATen.h>
#include <cuda_runtime_api.h>

#include <array>
#include <optional>
#include <tuple>

namespace nvgpu::ops {

using at::Tensor;

// Matrix products (cuBLAS).
Tensor mm(cudaStream_t stream, const Tensor& self, const Tensor& mat2);
Tensor addmm(cudaStream_t stream, const Tensor& self, const Tensor& mat1, const Tensor& mat2,
             const at::Scalar& beta, const at::Scalar& alpha);
Tensor bmm(cudaStream_t stream, const Tensor& self, const Tensor& mat2);
Tensor baddbmm(cudaStream_t stream, const Tensor& self, const Tensor& batch1, const Tensor& batch2,
               const at::Scalar& beta, const at::Scalar& alpha);
// Their out= forms (torch.compile's graphs call these) and in-place forms.
Tensor& mm_out(cudaStream_t stream, const Tensor& self, const Tensor& mat2, Tensor& out);
Tensor& addmm_out(cudaStream_t stream, const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                  const at::Scalar& beta, const at::Scalar& alpha, Tensor& out);
Tensor& bmm_out(cudaStream_t stream, const Tensor& self, const Tensor& mat2, Tensor& out);
Tensor& baddbmm_out(cudaStream_t stream, const Tensor& self, const Tensor& batch1, const Tensor& batch2,
                    const at::Scalar& beta, const at::Scalar& alpha, Tensor& out);
Tensor& addmm_(cudaStream_t stream, Tensor& self, const Tensor& mat1, const Tensor& mat2, const at::Scalar& beta,
               const at::Scalar& alpha);
Tensor& baddbmm_(cudaStream_t stream, Tensor& self, const Tensor& batch1, const Tensor& batch2,
                 const at::Scalar& beta, const at::Scalar& alpha);

// Convolution (cuDNN).
Tensor convolution(cudaStream_t stream, const Tensor& input, const Tensor& weight,
                   const std::optional<Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                   at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
                   int64_t groups);
std::tuple<Tensor, Tensor, Tensor> convolution_backward(
    cudaStream_t stream, const Tensor& grad_output, const Tensor& input, const Tensor& weight,
    at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask);

// Normalization.
std::tuple<Tensor, Tensor, Tensor> batch_norm(
    cudaStream_t stream, const Tensor& input, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& bias, const std::optional<Tensor>& running_mean,
    const std::optional<Tensor>& running_var, bool training, double momentum, double eps);
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(
    cudaStream_t stream, const Tensor& grad_out, const Tensor& input,
    const std::optional<Tensor>& weight, const std::optional<Tensor>& running_mean,
    const std::optional<Tensor>& running_var, const std::optional<Tensor>& save_mean,
    const std::optional<Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask);

// Pooling.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(cudaStream_t stream, const Tensor& self,
                                                   at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                   at::IntArrayRef padding, at::IntArrayRef dilation,
                                                   bool ceil_mode);
Tensor max_pool2d_with_indices_backward(cudaStream_t stream, const Tensor& grad_output,
                                        const Tensor& self, at::IntArrayRef kernel_size,
                                        at::IntArrayRef stride, at::IntArrayRef padding,
                                        at::IntArrayRef dilation, bool ceil_mode,
                                        const Tensor& indices);
Tensor adaptive_avg_pool2d(cudaStream_t stream, const Tensor& self, at::IntArrayRef output_size);
Tensor adaptive_avg_pool2d_backward(cudaStream_t stream, const Tensor& grad_output, const Tensor& self);

// Softmax and cross-entropy.
Tensor softmax(cudaStream_t stream, const Tensor& self, int64_t dim, bool half_to_float);
Tensor softmax_backward(cudaStream_t stream, const Tensor& grad_output, const Tensor& output, int64_t dim,
                        at::ScalarType input_dtype);
Tensor log_softmax(cudaStream_t stream, const Tensor& self, int64_t dim, bool half_to_float);
Tensor log_softmax_backward(cudaStream_t stream, const Tensor& grad_output, const Tensor& output,
                            int64_t dim, at::ScalarType input_dtype);
std::tuple<Tensor, Tensor> nll_loss_forward(cudaStream_t stream, const Tensor& self, const Tensor& target,
                                            const std::optional<Tensor>& weight, int64_t reduction,
                                            int64_t ignore_index);
Tensor nll_loss_backward(cudaStream_t stream, const Tensor& grad_output, const Tensor& self,
                         const Tensor& target, const std::optional<Tensor>& weight, int64_t reduction,
                         int64_t ignore_index, const Tensor& total_weight);

// Embedding (the forward is index_select).
Tensor index_select(cudaStream_t stream, const Tensor& self, int64_t dim, const Tensor& index);
Tensor embedding_dense_backward(cudaStream_t stream, const Tensor& grad_output, const Tensor& indices,
                                int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq);

// scaled_dot_product_attention: the fused kernel CUDA's own choice would run, as
// memory-efficient attention (torch's composite runs flash for CUDA tensors only); 0 (math)
// where CUDA's answer is not a fused kernel that serves the call. Dropout draws from the chip's
// generator.
int64_t fused_sdp_choice(cudaStream_t stream, const Tensor& query, const Tensor& key, const Tensor& value,
                         const std::optional<Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa);
std::tuple<Tensor, Tensor, Tensor, Tensor> efficient_attention(
    cudaStream_t stream, const Tensor& query, const Tensor& key, const Tensor& value,
    const std::optional<Tensor>& attn_bias, bool compute_log_sumexp, double dropout_p, bool is_causal,
    std::optional<double> scale);
std::tuple<Tensor, Tensor, Tensor, Tensor> efficient_attention_backward(
    cudaStream_t stream, const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value,
    const Tensor& attn_bias, const Tensor& out, const Tensor& logsumexp, const Tensor& philox_seed,
    const Tensor& philox_offset, double dropout_p, std::array<bool, 4> grad_input_mask, bool is_causal,
    std::optional<double> scale);

// Same-device copy with dtype conversion and arbitrary strides (the runtime's _copy_from).
Tensor& copy_(cudaStream_t stream, Tensor& self, const Tensor& src, bool non_blocking);

}  // namespace nvgpu::ops
