// Shared machinery of the simnpu kernel library.
//
// A kernel = host part + device part:
//   host:   check arguments (TORCH_CHECK, mostly by running the op on `meta`
//           tensors of the same metadata), allocate outputs on the device
//           through the backend's allocator, capture plain metadata (TMeta).
//   device: a closure queued on the stream with simnpuLaunchHostFunc that
//           wraps the device buffers in CPU tensors (at::from_blob) and runs
//           the ATen CPU operator on them. Exceptions become a sticky
//           simnpuErrorLaunchFailure on the stream.
#pragma once

#include <simnpu/simnpu_kernels.h>

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace simnpu::detail {

using at::Tensor;

// Plain metadata of a kernel argument; never keeps a device tensor alive.
struct TMeta {
  bool defined = false;
  void* ptr = nullptr;
  std::vector<int64_t> sizes, strides;
  at::ScalarType dtype = at::kFloat;
  // a 0-dim CPU tensor (wrapped scalar): carried by value
  bool is_scalar = false;
  bool wrapped = false;
  at::Scalar value;

  // CPU tensor over the device buffer (or the scalar); undefined if !defined.
  Tensor view() const;
  std::optional<Tensor> opt() const {
    return defined ? std::optional<Tensor>(view()) : std::nullopt;
  }
};

TMeta cap(const Tensor& t);
TMeta cap(const std::optional<Tensor>& t);

// Meta tensor with the sizes/strides/dtype of t (undefined stays undefined).
// The meta tensor of binary operand `t` whose other operand is `peer`: promotion of a
// wrapped Python number kept exact (see common.cpp).
Tensor meta_operand(const Tensor& t, const Tensor& peer);
Tensor meta(const Tensor& t);
std::optional<Tensor> meta(const std::optional<Tensor>& t);

// Device tensor shaped like the meta result m (memory format kept), on like's device.
Tensor alloc_like_meta(const Tensor& m, const Tensor& like);
Tensor alloc(at::IntArrayRef sizes, at::ScalarType dtype, const Tensor& like,
             at::MemoryFormat fmt = at::MemoryFormat::Contiguous);

// All defined tensors must be on the same simnpu device (0-dim CPU tensors
// are accepted when allow_cpu_scalars). Returns the first device tensor.
const Tensor& check_devices(const char* op, std::initializer_list<const Tensor*> ts,
                            bool allow_cpu_scalars = true);
inline const Tensor* p(const std::optional<Tensor>& t) { return t ? &*t : nullptr; }

// Queue fn on stream; throws c10::Error if the launch itself fails.
void launch(simnpuStream_t stream, const char* op, std::function<void()> fn);

// Write `result` into output view `out` (for ATen ops that only return new tensors).
inline void write(const TMeta& out, const Tensor& result) {
  if (out.defined && result.defined()) out.view().copy_(result);
}

inline std::vector<int64_t> vec(at::IntArrayRef a) { return a.vec(); }
inline std::optional<std::vector<int64_t>> vec(at::OptionalIntArrayRef a) {
  return a ? std::optional<std::vector<int64_t>>(a->vec()) : std::nullopt;
}
inline at::OptionalIntArrayRef ref(const std::optional<std::vector<int64_t>>& v) {
  return v ? at::OptionalIntArrayRef(*v) : at::OptionalIntArrayRef(std::nullopt);
}

// Random: run fn(cpu_generator) with the device generator's state (see header).
at::Generator resolve_generator(const std::optional<at::Generator>& g, const Tensor& self);
void with_cpu_generator(const at::Generator& gen, const std::function<void(at::Generator&)>& fn);

}  // namespace simnpu::detail
