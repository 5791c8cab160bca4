// The operators every driver-hook chip needs before any vendor kernel: tensor
// creation, views, resizing, copies between host and chip (through the driver's
// memcpy hooks) and reading a scalar back. They are chip-agnostic: the
// generated backend registers them with register_core_ops().
#pragma once

#include <ATen/core/IListRef.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

namespace torch_fl {

// A vendor kernel for same-device copies with dtype conversion or strides
// (the spec's `copy_` entry), bound to the current stream by the generated code.
// In a composite backend each member chip has its own (`member`, torch_fl/driver_mux.h).
using DeviceCopyKernel = at::Tensor& (*)(at::Tensor& self, const at::Tensor& src, bool non_blocking);
void set_device_copy_kernel(DeviceCopyKernel kernel, int member = 0);

// dst.copy_(src) where either side is on the chip.
at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool non_blocking);

// The dtypes the spec lists (`dtypes:`): creating a tensor of any other dtype
// on the chip is refused with an error naming the chip and the spec. A composite backend
// sets them per member chip (`chip` names the member in the error).
void set_supported_dtypes(std::vector<c10::ScalarType> dtypes, std::string spec, std::string listed,
                          int member = 0, std::string chip = "");
// Whether `device`'s chip (-1: the current device's) takes `dtype`.
bool dtype_supported(c10::ScalarType dtype, c10::DeviceIndex device = -1);

// A chip storage resized to `new_bytes` through the caching allocator, its first bytes kept
// (copied on the device, in stream order): resize_ and UntypedStorage.resize_ both use it.
void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes);

// torch lets a lazily conjugated or negated view (a tensor with the conj or neg bit) through
// to the backend for a few ops (mm, addmm, bmm, dot, copy_, clone, ...: its Conjugate and
// Negative fallthrough lists). Kernels read raw memory, so generated vendor wrappers pass
// their inputs through resolve_math_bits and refuse such a view as an output.
inline at::Tensor resolve_math_bits(const at::Tensor& t) {
  return (t.defined() && (t.is_conj() || t.is_neg())) ? t.resolve_conj().resolve_neg() : t;
}
inline std::optional<at::Tensor> resolve_math_bits(const std::optional<at::Tensor>& t) {
  return t.has_value() ? std::optional<at::Tensor>(resolve_math_bits(*t)) : t;
}
void check_no_math_bits(const at::Tensor& written, const char* op);

// The device a vendor kernel runs on: the first of `tensors` that lives on the chip (the
// generated wrappers pass the written ones first). Not simply the first tensor argument's:
// ATen's composite kernels put wrapped CPU scalars first (mul_.Scalar calls
// mul.out(<scalar>, self, out=self)), and so do users (`torch.tensor(2.) * x`); a guard on
// that CPU tensor would leave the current device's stream in charge of another device's
// memory, unordered against the work queued there.
namespace detail {
inline std::optional<c10::Device> chip_device(const at::Tensor& t) {
  return t.defined() && t.is_privateuseone() ? std::optional<c10::Device>(t.device()) : std::nullopt;
}
inline std::optional<c10::Device> chip_device(const std::optional<at::Tensor>& t) {
  return t.has_value() ? chip_device(*t) : std::nullopt;
}
inline std::optional<c10::Device> chip_device(const at::ITensorListRef& tensors) {
  for (const at::Tensor& t : tensors) {
    if (auto device = chip_device(t)) return device;
  }
  return std::nullopt;
}
inline std::optional<c10::Device> chip_device(at::TensorList tensors) {
  for (const at::Tensor& t : tensors) {
    if (auto device = chip_device(t)) return device;
  }
  return std::nullopt;
}
}  // namespace detail

template <class... Tensors>
std::optional<c10::Device> kernel_device(const Tensors&... tensors) {
  std::optional<c10::Device> found;
  (void)((found = detail::chip_device(tensors)).has_value() || ...);
  return found;
}

void register_core_ops(torch::Library& m);

}  // namespace torch_fl
