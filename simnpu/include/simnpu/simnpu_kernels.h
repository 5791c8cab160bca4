/*
 * simnpu_kernels.h -- kernel library of the simulated NPU SDK.
 *
 * Every kernel takes the stream to run on first, then exactly the ATen
 * dispatcher signature (non-SymInt) of the aten operator it implements, so a
 * generated backend can bind `ops: {add.Tensor: {kernel: add}}` with no glue.
 *
 * Contract, as with a real chip:
 *  - tensor arguments live on a simnpu device (0-dim CPU tensors are accepted
 *    where ATen accepts a wrapped scalar, e.g. div.Tensor's `other`);
 *  - outputs are allocated with at::empty(..., device of the inputs), i.e.
 *    through the backend's allocator;
 *  - the computation is queued on `stream` with simnpuLaunchHostFunc and runs
 *    on the stream's worker thread, where it may compute with ATen CPU on the
 *    device's own buffers. The host never dereferences device memory.
 *  - errors in argument checking throw c10::Error (TORCH_CHECK) before
 *    anything is queued.
 *  - random kernels read/advance the generator through the generic
 *    GeneratorImpl get_state/set_state API; the device generator's state begins
 *    with the CPU (mt19937) generator's layout (its first CPU-state bytes; the
 *    chip's Philox offset follows), so a seeded device draws the same numbers as
 *    a seeded CPU; set_state with the CPU layout alone keeps the offset. A CPU
 *    generator passed explicitly is used as is.
 */
#pragma once

#include <ATen/ATen.h>
#include <simnpu/simnpu_runtime.h>

#include <optional>
#include <tuple>

namespace simnpu::ops {

using at::Tensor;

// Pointwise (broadcasting, type promotion as ATen).
Tensor add(simnpuStream_t stream, const Tensor& self, const Tensor& other, const at::Scalar& alpha);
Tensor& add_(simnpuStream_t stream, Tensor& self, const Tensor& other, const at::Scalar& alpha);
Tensor sub(simnpuStream_t stream, const Tensor& self, const Tensor& other, const at::Scalar& alpha);
Tensor& sub_(simnpuStream_t stream, Tensor& self, const Tensor& other, const at::Scalar& alpha);
Tensor mul(simnpuStream_t stream, const Tensor& self, const Tensor& other);
Tensor& mul_(simnpuStream_t stream, Tensor& self, const Tensor& other);
Tensor div(simnpuStream_t stream, const Tensor& self, const Tensor& other);
Tensor& div_(simnpuStream_t stream, Tensor& self, const Tensor& other);
// out= variants (aten::add.out ...): `out` is resized when its shape differs.
Tensor& add_out(simnpuStream_t stream, const Tensor& self, const Tensor& other, const at::Scalar& alpha,
                Tensor& out);
Tensor& sub_out(simnpuStream_t stream, const Tensor& self, const Tensor& other, const at::Scalar& alpha,
                Tensor& out);
Tensor& mul_out(simnpuStream_t stream, const Tensor& self, const Tensor& other, Tensor& out);
Tensor& div_out(simnpuStream_t stream, const Tensor& self, const Tensor& other, Tensor& out);
Tensor relu(simnpuStream_t stream, const Tensor& self);
Tensor& relu_(simnpuStream_t stream, Tensor& self);
Tensor threshold_backward(simnpuStream_t stream, const Tensor& grad_output, const Tensor& self,
                          const at::Scalar& threshold);

// Linear algebra.
Tensor mm(simnpuStream_t stream, const Tensor& self, const Tensor& mat2);
Tensor addmm(simnpuStream_t stream, const Tensor& self, const Tensor& mat1, const Tensor& mat2,
             const at::Scalar& beta, const at::Scalar& alpha);
// Their out= forms (torch.compile's graphs call these): `out` resized to the result.
Tensor& mm_out(simnpuStream_t stream, const Tensor& self, const Tensor& mat2, Tensor& out);
Tensor& addmm_out(simnpuStream_t stream, const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                  const at::Scalar& beta, const at::Scalar& alpha, Tensor& out);

// Convolution (aten::convolution / aten::convolution_backward).
Tensor convolution(simnpuStream_t stream, const Tensor& input, const Tensor& weight,
                   const std::optional<Tensor>& bias, at::IntArrayRef stride, at::IntArrayRef padding,
                   at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
                   int64_t groups);
std::tuple<Tensor, Tensor, Tensor> convolution_backward(
    simnpuStream_t stream, const Tensor& grad_output, const Tensor& input, const Tensor& weight,
    at::OptionalIntArrayRef bias_sizes, at::IntArrayRef stride, at::IntArrayRef padding,
    at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask);

// Pooling.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(simnpuStream_t stream, const Tensor& self,
                                                   at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                   at::IntArrayRef padding, at::IntArrayRef dilation,
                                                   bool ceil_mode);
Tensor max_pool2d_with_indices_backward(simnpuStream_t stream, const Tensor& grad_output,
                                        const Tensor& self, at::IntArrayRef kernel_size,
                                        at::IntArrayRef stride, at::IntArrayRef padding,
                                        at::IntArrayRef dilation, bool ceil_mode,
                                        const Tensor& indices);
Tensor adaptive_avg_pool2d(simnpuStream_t stream, const Tensor& self, at::IntArrayRef output_size);
Tensor adaptive_avg_pool2d_backward(simnpuStream_t stream, const Tensor& grad_output,
                                    const Tensor& self);

// Normalization (aten::native_batch_norm / aten::native_batch_norm_backward).
std::tuple<Tensor, Tensor, Tensor> batch_norm(
    simnpuStream_t stream, const Tensor& input, const std::optional<Tensor>& weight,
    const std::optional<Tensor>& bias, const std::optional<Tensor>& running_mean,
    const std::optional<Tensor>& running_var, bool training, double momentum, double eps);
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(
    simnpuStream_t stream, const Tensor& grad_out, const Tensor& input,
    const std::optional<Tensor>& weight, const std::optional<Tensor>& running_mean,
    const std::optional<Tensor>& running_var, const std::optional<Tensor>& save_mean,
    const std::optional<Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> output_mask);

// Softmax and loss.
Tensor log_softmax(simnpuStream_t stream, const Tensor& self, int64_t dim, bool half_to_float);
Tensor log_softmax_backward(simnpuStream_t stream, const Tensor& grad_output, const Tensor& output,
                            int64_t dim, at::ScalarType input_dtype);
std::tuple<Tensor, Tensor> nll_loss_forward(simnpuStream_t stream, const Tensor& self,
                                            const Tensor& target,
                                            const std::optional<Tensor>& weight,
                                            int64_t reduction, int64_t ignore_index);
Tensor nll_loss_backward(simnpuStream_t stream, const Tensor& grad_output, const Tensor& self,
                         const Tensor& target, const std::optional<Tensor>& weight,
                         int64_t reduction, int64_t ignore_index, const Tensor& total_weight);

// Reductions (aten::sum.dim_IntList / aten::mean.dim).
Tensor sum(simnpuStream_t stream, const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
           std::optional<at::ScalarType> dtype);
Tensor mean(simnpuStream_t stream, const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
            std::optional<at::ScalarType> dtype);

// Fill, copy, concatenation.
Tensor& fill_(simnpuStream_t stream, Tensor& self, const at::Scalar& value);
Tensor& zero_(simnpuStream_t stream, Tensor& self);
// Same-device copy with dtype conversion and arbitrary strides on both sides
// (self and src on the same simnpu device, shapes broadcastable to self).
Tensor& copy_(simnpuStream_t stream, Tensor& self, const Tensor& src, bool non_blocking);
Tensor cat(simnpuStream_t stream, const at::ITensorListRef& tensors, int64_t dim);

// Random (aten::normal_, uniform_, random_, random_.from, random_.to, randperm.generator_out).
Tensor& normal_(simnpuStream_t stream, Tensor& self, double mean, double std,
                std::optional<at::Generator> generator);
Tensor& uniform_(simnpuStream_t stream, Tensor& self, double from, double to,
                 std::optional<at::Generator> generator);
Tensor& random_(simnpuStream_t stream, Tensor& self, std::optional<at::Generator> generator);
Tensor& random_from(simnpuStream_t stream, Tensor& self, int64_t from, std::optional<int64_t> to,
                    std::optional<at::Generator> generator);
Tensor& random_to(simnpuStream_t stream, Tensor& self, int64_t to,
                  std::optional<at::Generator> generator);
Tensor& randperm_out(simnpuStream_t stream, int64_t n, std::optional<at::Generator> generator,
                     Tensor& out);

}  // namespace simnpu::ops
