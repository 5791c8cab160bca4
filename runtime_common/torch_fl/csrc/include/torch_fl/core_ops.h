// The operators every driver-hook chip needs before any vendor kernel: tensor
// creation, views, resizing, copies between host and chip (through the driver's
// memcpy hooks) and reading a scalar back. They are chip-agnostic: the
// generated backend registers them with register_core_ops().
#pragma once

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

void register_core_ops(torch::Library& m);

}  // namespace torch_fl
