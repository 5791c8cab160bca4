#include <torch_fl/caching_allocator.h>
#include <torch_fl/core_ops.h>
#include <torch_fl/driver.h>
#include <torch_fl/fallback.h>
#include <torch_fl/host_allocator.h>
#include <torch_fl/streams.h>

#include <ATen/EmptyTensor.h>
#include <c10/util/accumulate.h>
#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <torch_fl/driver_mux.h>

namespace torch_fl {

namespace {

constexpr c10::DispatchKeySet kChipKeys(c10::DispatchKey::PrivateUse1);

// Per member chip (one for a single chip; a composite's members: torch_fl/driver_mux.h).
constexpr int kMaxMembers = 16;
DeviceCopyKernel device_copy_kernels[kMaxMembers] = {};

struct DtypePolicy {
  std::vector<c10::ScalarType> supported;  // empty: not configured, everything allowed
  std::string spec;
  std::string listed;                      // as the spec writes them
  std::string chip;                        // a composite's member; empty: the backend's chip
};

DtypePolicy& dtype_policy(int member) {
  static auto* policies = new std::vector<DtypePolicy>(kMaxMembers);
  return (*policies)[member >= 0 && member < kMaxMembers ? member : 0];
}

int member_of_device(c10::DeviceIndex device) {
  if (mux_member_count() == 1) return 0;  // a single chip: no driver call on every tensor creation
  return mux_member_of(device >= 0 ? device : current_device());
}

// A dtype as torch and the spec spell it (torch.complex64), not as C++ does (ComplexFloat).
std::string torch_dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::kFloat: return "float32";
    case c10::kDouble: return "float64";
    case c10::kHalf: return "float16";
    case c10::kBFloat16: return "bfloat16";
    case c10::kChar: return "int8";
    case c10::kByte: return "uint8";
    case c10::kShort: return "int16";
    case c10::kInt: return "int32";
    case c10::kLong: return "int64";
    case c10::kBool: return "bool";
    case c10::kComplexFloat: return "complex64";
    case c10::kComplexDouble: return "complex128";
    default: return c10::toString(dtype);
  }
}

// A zero-element byte tensor is how torch views an untyped storage to copy it (torch.save,
// storage.cpu(), torch.load's map_location): bytes, not values of a dtype, so any chip takes it.
bool is_storage_byte_view(c10::IntArrayRef size, c10::ScalarType dtype) {
  return dtype == c10::kByte && c10::multiply_integers(size) == 0;
}

void check_dtype(c10::ScalarType dtype, c10::Device device) {
  const auto& policy = dtype_policy(member_of_device(device.index()));
  if (policy.supported.empty()) return;
  for (auto allowed : policy.supported) {
    if (allowed == dtype) return;
  }
  const auto& description = Driver::instance().description();
  const std::string where = policy.chip.empty()
                                ? "chip '" + description.chip + "'"
                                : "chip '" + policy.chip + "' (" + device.str() + " of the composite '" +
                                      description.chip + "')";
  // NotImplementedError, not TypeError: Python's operators turn a TypeError into "unsupported
  // operand type(s)" (torch's wrappers return NotImplemented), which would hide this message.
  TORCH_CHECK_NOT_IMPLEMENTED(false, where, " does not support dtype torch.", torch_dtype_name(dtype),
                   " (spec ", policy.spec, policy.chip.empty() ? ", driver " + description.built_version : std::string(),
                   ", lists dtypes: ", policy.listed, ")");
}

const DriverDescription& desc() { return Driver::instance().description(); }

// Bytes from a tensor's first element to one past its last (strides are >= 0).
size_t span_bytes(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return static_cast<size_t>(last + 1) * t.element_size();
}

// Strides describing the span as its own buffer (storage offset 0).
at::Tensor host_view_of_span(const at::Tensor& like, void* base) {
  return at::from_blob(base, like.sizes(), like.strides(), at::TensorOptions().dtype(like.dtype()));
}

void* device_ptr(const at::Tensor& t) { return const_cast<void*>(t.const_data_ptr()); }

bool is_dense(const at::Tensor& t) { return t.is_non_overlapping_and_dense(); }

// Host memory a copy still uses after its wait failed (a stream that timed out keeps its
// queued copies): kept alive until an event recorded after the copy completes.
std::mutex orphans_mutex;
std::vector<std::pair<void*, c10::Storage>> orphaned_copies;

void release_finished_orphans() {
  std::lock_guard<std::mutex> lock(orphans_mutex);
  auto& d = Driver::instance();
  for (auto it = orphaned_copies.begin(); it != orphaned_copies.end();) {
    const int status = driver().event_query(it->first);
    if (status == d.description().status_not_ready) {
      ++it;
      continue;
    }
    driver().event_destroy(it->first);
    it = orphaned_copies.erase(it);
  }
}

// Waits for a copy between `host` and the chip on `stream`. If the wait fails (a timeout, a
// lost device), the host buffer must outlive the copy still queued on the stream: it is kept
// until the stream gets past it, and the error goes on to the caller.
void synchronize_copy(const c10::Stream& stream, const at::Tensor& host) {
  try {
    synchronize_stream(stream);
  } catch (...) {
    void* event = nullptr;
    if (Driver::instance().ok(driver().event_create(&event)) &&
        Driver::instance().ok(driver().event_record(event, native_stream(stream)))) {
      std::lock_guard<std::mutex> lock(orphans_mutex);
      orphaned_copies.emplace_back(event, host.storage());
    } else {
      new c10::Storage(host.storage());  // no event to wait on: never freed rather than freed too early
    }
    throw;
  }
}

// Host -> chip: dst is on the chip, src on the host.
void copy_host_to_device(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  release_finished_orphans();
  const c10::DeviceGuard guard(dst.device());
  const auto stream = current_stream(dst.device().index());
  void* dst_ptr = device_ptr(dst);
  const size_t bytes = span_bytes(dst);
  const bool direct = is_dense(dst) && src.dtype() == dst.dtype() && src.sizes() == dst.sizes() &&
                      src.strides() == dst.strides() && src.storage_offset() >= 0;
  if (direct) {
    const bool pinned = PinnedHostAllocator::instance().is_pinned(src.data_ptr());
    TORCH_FL_DRIVER_CHECK(driver().memcpy_async(dst_ptr, src.data_ptr(), bytes, desc().memcpy_host_to_device,
                                                native_stream(stream)));
    if (non_blocking && pinned) {
      PinnedHostAllocator::instance().record_copy(src.data_ptr(), native_stream(stream));
    } else {
      synchronize_copy(stream, src);
    }
    return;
  }
  // Stage on the host in dst's layout; where dst has gaps (a strided view), read
  // the span first so the bytes between its elements are written back unchanged.
  at::Tensor staging = at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte));
  if (!is_dense(dst)) {
    TORCH_FL_DRIVER_CHECK(driver().memcpy_async(staging.data_ptr(), dst_ptr, bytes, desc().memcpy_device_to_host,
                                                native_stream(stream)));
    synchronize_copy(stream, staging);
  }
  host_view_of_span(dst, staging.data_ptr()).copy_(src);
  TORCH_FL_DRIVER_CHECK(driver().memcpy_async(dst_ptr, staging.data_ptr(), bytes, desc().memcpy_host_to_device,
                                              native_stream(stream)));
  synchronize_copy(stream, staging);  // the staging buffer dies with this scope
}

// Chip -> host: src is on the chip, dst on the host.
void copy_device_to_host(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  release_finished_orphans();
  const c10::DeviceGuard guard(src.device());
  const auto stream = current_stream(src.device().index());
  const void* src_ptr = device_ptr(src);
  const size_t bytes = span_bytes(src);
  const bool direct = is_dense(src) && dst.dtype() == src.dtype() && dst.sizes() == src.sizes() &&
                      dst.strides() == src.strides();
  if (direct) {
    const bool pinned = PinnedHostAllocator::instance().is_pinned(dst.data_ptr());
    TORCH_FL_DRIVER_CHECK(driver().memcpy_async(dst.data_ptr(), src_ptr, bytes, desc().memcpy_device_to_host,
                                                native_stream(stream)));
    if (non_blocking && pinned) {
      PinnedHostAllocator::instance().record_copy(dst.data_ptr(), native_stream(stream));
    } else {
      synchronize_copy(stream, dst);
    }
    return;
  }
  at::Tensor staging = at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte));
  TORCH_FL_DRIVER_CHECK(driver().memcpy_async(staging.data_ptr(), src_ptr, bytes, desc().memcpy_device_to_host,
                                              native_stream(stream)));
  synchronize_copy(stream, staging);
  const_cast<at::Tensor&>(dst).copy_(host_view_of_span(src, staging.data_ptr()));
}

// Same device, same dtype, both dense with equal strides: one driver copy.
bool copy_device_bytes(const at::Tensor& src, const at::Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.sizes() != dst.sizes() || src.strides() != dst.strides() ||
      !is_dense(src)) {
    return false;
  }
  const c10::DeviceGuard guard(dst.device());
  const auto stream = current_stream(dst.device().index());
  TORCH_FL_DRIVER_CHECK(driver().memcpy_async(device_ptr(dst), device_ptr(src), span_bytes(src),
                                              desc().memcpy_device_to_device, native_stream(stream)));
  return true;
}

void copy_within_device(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  if (copy_device_bytes(src, dst)) return;
  if (DeviceCopyKernel kernel = device_copy_kernels[member_of_device(dst.device().index())]) {
    const c10::DeviceGuard guard(dst.device());
    kernel(const_cast<at::Tensor&>(dst), src, non_blocking);
    return;
  }
  // No vendor copy kernel: stage through the host, a visible CPU fallback.
  note_fallback("copy_", FallbackPath::cpu);
  at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU));
  copy_device_to_host(src, host, false);
  copy_host_to_device(host, dst, false);
}

void copy_between_devices(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  // Make src a dense tensor of dst's dtype and layout on its own device, then
  // move bytes peer to peer after src's stream has finished producing them.
  at::Tensor packed = at::empty_strided(dst.sizes(), dst.strides(), src.options().dtype(dst.dtype()));
  if (!is_dense(dst)) packed = at::empty(dst.sizes(), src.options().dtype(dst.dtype()));
  copy_within_device(src.expand(dst.sizes()), packed, non_blocking);
  synchronize_stream(current_stream(src.device().index()));
  at::Tensor landing = at::empty_strided(packed.sizes(), packed.strides(), dst.options());
  {
    const c10::DeviceGuard guard(dst.device());
    const auto stream = current_stream(dst.device().index());
    TORCH_FL_DRIVER_CHECK(driver().memcpy_async(device_ptr(landing), device_ptr(packed), span_bytes(packed),
                                                desc().memcpy_device_to_device, native_stream(stream)));
    synchronize_stream(stream);  // `packed` is freed on its own stream when we return
  }
  copy_within_device(landing, dst, non_blocking);
}

// A copy between the chip and a device torch drives itself (cuda, xpu, ...) whose memory the
// chip's driver shares (`driver.shares_memory_with`, same device index): one device-to-device
// copy on the chip's current stream, after the native device's current stream has produced
// its side (an event of the native runtime the chip's stream waits on) and before that stream
// goes on (a chip event it waits on), so neither caching allocator reuses a block too early.
// Asynchronous to the host, as torch's own copies between two GPUs.
void copy_through_shared_memory(const at::Tensor& src, const at::Tensor& dst) {
  const bool src_on_chip = src.device().is_privateuseone();
  const c10::Device chip_device = src_on_chip ? src.device() : dst.device();
  const c10::Device native_device = src_on_chip ? dst.device() : src.device();
  // Both ends dense in one layout and dtype (and dst no conjugate or negative view): the bytes
  // move as they are. Otherwise src is packed densely on its own device, in the dtype the native
  // side converts from or to (the chip need not have dst's dtype), and lands in a dense tensor
  // on dst's device, whose own copy_ then converts and applies dst's view bits.
  at::Tensor from = src.expand(dst.sizes());
  at::Tensor to = dst;
  if (!(is_dense(from) && is_dense(dst) && from.dtype() == dst.dtype() && from.strides() == dst.strides() &&
        !dst.is_conj() && !dst.is_neg())) {
    const auto packed_dtype = src_on_chip ? src.scalar_type() : dst.scalar_type();
    from = at::empty(dst.sizes(), src.options().dtype(packed_dtype));
    from.copy_(src.expand(dst.sizes()));
    to = at::empty(dst.sizes(), dst.options().dtype(packed_dtype));
  }
  const c10::impl::DeviceGuardImplInterface* native = c10::impl::getDeviceGuardImpl(native_device.type());
  const c10::Stream native_current = native->getStream(native_device);
  const c10::DeviceGuard guard(chip_device);
  void* chip_stream = native_stream(current_stream(chip_device.index()));
  void* chip_done = nullptr;
  TORCH_FL_DRIVER_CHECK(driver().event_create(&chip_done));
  void* native_done = nullptr;
  bool queued = false;
  try {
    native->record(&native_done, native_current, native_device.index(), c10::EventFlag::PYTORCH_DEFAULT);
    // The native runtime's guards may leave another device current (c10's own device record
    // does not see the chip driver's): the chip's device again before its stream is used.
    TORCH_FL_DRIVER_CHECK(driver().set_device(chip_device.index()));
    TORCH_FL_DRIVER_CHECK(driver().stream_wait_event(chip_stream, native_done, 0));
    TORCH_FL_DRIVER_CHECK(driver().memcpy_async(device_ptr(to), device_ptr(from), span_bytes(from),
                                                desc().memcpy_device_to_device, chip_stream));
    queued = true;
    TORCH_FL_DRIVER_CHECK(driver().event_record(chip_done, chip_stream));
    native->block(chip_done, native_current);
    TORCH_FL_DRIVER_CHECK(driver().set_device(chip_device.index()));
  } catch (...) {
    // The temporaries go back to their allocators as this unwinds: a copy still queued must
    // be done first, since the native stream may not wait for it.
    if (queued) driver().stream_synchronize(chip_stream);
    if (native_done != nullptr) native->destroyEvent(native_done, native_device.index());
    driver().event_destroy(chip_done);
    throw;
  }
  // Both runtimes release an event once the waits queued on it are done.
  native->destroyEvent(native_done, native_device.index());
  driver().event_destroy(chip_done);
  if (!to.is_same(dst)) const_cast<at::Tensor&>(dst).copy_(to);  // on dst's device, after the copy
}

// A copy between the chip and a device torch drives itself, through the host: the source's
// device fills a host tensor (waiting for its stream), the destination's reads it. The host
// tensor dies here, so the copy is complete when this returns, as torch's copies through
// pageable memory are.
void copy_with_native_device(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  const bool src_on_chip = src.device().is_privateuseone();
  const c10::Device chip_device = src_on_chip ? src.device() : dst.device();
  const c10::Device native_device = src_on_chip ? dst.device() : src.device();
  if (desc().shares_memory_with == native_device.type() && native_device.index() == chip_device.index() &&
      c10::impl::hasDeviceGuardImpl(native_device.type())) {
    copy_through_shared_memory(src, dst);
    return;
  }
  if (src_on_chip) {
    at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU));
    copy_device_to_host(src, host, false);
    const_cast<at::Tensor&>(dst).copy_(host);
  } else {
    const at::Tensor host = src.to(at::kCPU);
    copy_host_to_device(host.expand(dst.sizes()), dst, non_blocking);
  }
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  const auto where = c10::device_or_default(device);
  TORCH_CHECK(where.is_privateuseone(), "expected a ", desc().chip, " device, got ", where);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, desc().chip,
              " supports strided tensors only");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "only CPU memory can be pinned");
  if (!is_storage_byte_view(size, c10::dtype_or_default(dtype))) check_dtype(c10::dtype_or_default(dtype), where);
  const c10::DeviceGuard guard(where);
  return at::detail::empty_generic(size, &CachingDeviceAllocator::instance(), kChipKeys,
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  const auto where = c10::device_or_default(device);
  TORCH_CHECK(where.is_privateuseone(), "expected a ", desc().chip, " device, got ", where);
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, desc().chip,
              " supports strided tensors only");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "only CPU memory can be pinned");
  if (!is_storage_byte_view(size, c10::dtype_or_default(dtype))) check_dtype(c10::dtype_or_default(dtype), where);
  const c10::DeviceGuard guard(where);
  return at::detail::empty_strided_generic(size, stride, &CachingDeviceAllocator::instance(), kChipKeys,
                                           c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  return at::cpu::as_strided_symint(self, size, stride, std::move(storage_offset));
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

// Grows the storage through the chip's allocator (see resize_storage_bytes).
void grow_storage(const at::Tensor& self, size_t needed) {
  if (needed <= self.storage().nbytes()) return;
  resize_storage_bytes(self.storage(), needed);
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  const auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  if (impl->sizes() != sizes) impl->set_sizes_contiguous(sizes);
  const auto format = memory_format.value_or(c10::MemoryFormat::Contiguous);
  if (format != c10::MemoryFormat::Preserve) impl->empty_tensor_restride(format);
  if (self.numel() > 0) {
    grow_storage(self, (self.storage_offset() + static_cast<size_t>(span_bytes(self) / self.element_size())) *
                           self.element_size());
  }
  return self;
}

// Conjugate/Negative bits are lazy flags on views; our copies move bytes, so a flagged
// source is resolved on the host, where ATen's own kernels apply the flags. (The math-bit
// fallback would instead clone through copy_, which lands here again: endless recursion.)
at::Tensor copy_resolving_math_bits(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(!dst.is_conj() && !dst.is_neg(), "copy_: a conjugate or negative view is not a valid destination");
  at::Tensor host;
  if (!src.device().is_privateuseone()) {
    host = src.resolve_conj().resolve_neg();  // by the source device's own kernels
  } else {
    const bool conj = src.is_conj();
    const bool neg = src.is_neg();
    at::Tensor raw = conj ? src._conj() : src;  // _conj / _neg_view toggle the flag off (views)
    if (neg) raw = raw._neg_view();
    // Same strides as the source, for a byte-for-byte copy, unless they overlap (an
    // expanded view): a host tensor with overlapping strides cannot be written.
    at::Tensor bytes = raw.is_non_overlapping_and_dense()
                           ? at::empty_strided(raw.sizes(), raw.strides(), raw.options().device(at::kCPU))
                           : at::empty(raw.sizes(), raw.options().device(at::kCPU));
    copy_from(raw, bytes, false);
    if (conj) bytes = bytes._conj();
    if (neg) bytes = bytes._neg_view();
    host = bytes.resolve_conj().resolve_neg();
  }
  if (!dst.device().is_privateuseone()) {
    dst.copy_(host);
    return dst;
  }
  return copy_from(host, dst, non_blocking);
}

at::Tensor copy_from_op(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (self.is_conj() || self.is_neg()) return copy_resolving_math_bits(self, dst, non_blocking);
  return copy_from(self, dst, non_blocking);
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  // item() of any one-element tensor, e.g. shape [1]: copy it as a 0-dim view
  copy_from(self.view(c10::IntArrayRef{}), host, false);
  return host.item();
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) { return at::native::set_(self, source); }

at::Tensor& set_source_storage_offset(at::Tensor& self, at::Storage storage, int64_t storage_offset,
                                      c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::cpu::set_(self, storage, storage_offset, size, stride);
}

// A plain dense tensor of the chip or of a device c10 counts as dense (CPU, CUDA, ...).
bool is_plain_dense(const at::Tensor& t) {
  constexpr auto wrappers = c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::Functionalize});
  return t.layout() == c10::kStrided && t.key_set().has(c10::DispatchKey::Dense) && !t.key_set().has_any(wrappers);
}

// Module.to(chip) and `param.data = chip_tensor` keep the Parameter object (and so weights
// tied between modules) only when torch finds the two tensors shallow-copy compatible. c10
// answers that for its own dense backends only; every PrivateUse1 backend must answer it.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set())) return true;
  return is_plain_dense(self) && is_plain_dense(from) &&
         (self.device().is_privateuseone() || from.device().is_privateuseone());
}

void record_stream(at::Tensor& self, c10::Stream stream) {
  CachingDeviceAllocator::instance().recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

void set_device_copy_kernel(DeviceCopyKernel kernel, int member) {
  TORCH_CHECK(member >= 0 && member < kMaxMembers, "torch_fl: member index ", member, " out of range");
  device_copy_kernels[member] = kernel;
}

void check_no_math_bits(const at::Tensor& written, const char* op) {
  TORCH_CHECK(!written.is_conj() && !written.is_neg(), "aten::", op,
              ": the output is a conjugate or negative view (its conj or neg bit is set), which the chip's "
              "vendor kernel cannot write; pass a plain tensor (resolve_conj()/resolve_neg()) as the output");
}

void set_supported_dtypes(std::vector<c10::ScalarType> dtypes, std::string spec, std::string listed, int member,
                          std::string chip) {
  TORCH_CHECK(member >= 0 && member < kMaxMembers, "torch_fl: member index ", member, " out of range");
  dtype_policy(member) = DtypePolicy{std::move(dtypes), std::move(spec), std::move(listed), std::move(chip)};
}

void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
  const c10::Device device = impl->device();
  const c10::DeviceGuard guard(device);
  c10::DataPtr fresh = new_bytes > 0 ? CachingDeviceAllocator::instance().allocate(new_bytes)
                                     : c10::DataPtr(nullptr, device);
  const size_t kept = std::min(impl->nbytes(), new_bytes);
  if (kept > 0 && impl->data() != nullptr) {
    const auto stream = current_stream(device.index());
    TORCH_FL_DRIVER_CHECK(driver().memcpy_async(fresh.get(), impl->data(), kept, desc().memcpy_device_to_device,
                                                native_stream(stream)));
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(new_bytes);
}

bool dtype_supported(c10::ScalarType dtype, c10::DeviceIndex device) {
  const auto& supported = dtype_policy(member_of_device(device)).supported;
  return supported.empty() || std::find(supported.begin(), supported.end(), dtype) != supported.end();
}

at::Tensor copy_from(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(src.defined() && dst.defined(), "copy_: undefined tensor");
  if (dst.numel() == 0) return dst;
  const bool src_on_chip = src.device().is_privateuseone();
  const bool dst_on_chip = dst.device().is_privateuseone();
  if (src_on_chip && dst_on_chip) {
    if (src.device() == dst.device()) {
      copy_within_device(src, dst, non_blocking);
    } else if (mux_member_of(src.device().index()) != mux_member_of(dst.device().index())) {
      // Two chips of a composite: each converts on its own side of the host (the other chip may
      // lack the dtype), as a copy with a device torch drives itself does.
      at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU));
      copy_device_to_host(src, host, false);
      copy_host_to_device(host.expand(dst.sizes()), dst, non_blocking);
    } else {
      copy_between_devices(src, dst, non_blocking);
    }
  } else if (!src_on_chip && !dst_on_chip) {
    const_cast<at::Tensor&>(dst).copy_(src, non_blocking);  // a resolved math-bit source, off the chip
  } else if (dst.device().is_meta() || src.device().is_meta()) {
    TORCH_CHECK(false, "cannot copy from ", src.device(), " to ", dst.device(), ": a meta tensor has no data");
  } else if (dst_on_chip && src.device().is_cpu()) {
    copy_host_to_device(src.expand(dst.sizes()), dst, non_blocking);
  } else if (src_on_chip && dst.device().is_cpu()) {
    copy_device_to_host(src, dst, non_blocking);
  } else {
    copy_with_native_device(src, dst, non_blocking);
  }
  return dst;
}

// _copy_from sees math-bit sources itself (see copy_resolving_math_bits).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) { m.impl("_copy_from", torch::CppFunction::makeFallthrough()); }
TORCH_LIBRARY_IMPL(aten, Negative, m) { m.impl("_copy_from", torch::CppFunction::makeFallthrough()); }

void register_core_ops(torch::Library& m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  // views: sizes and strides only, the same on every backend
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("_copy_from", TORCH_FN(copy_from_op));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_source_storage_offset));
  m.impl("record_stream", TORCH_FN(record_stream));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  // Without a vendor `convolution` torch sends a chip's convolution and its backward to these
  // two, whose only kernels (CompositeExplicitAutograd, ahead of any backend fallback) raise
  // "not implemented": they take the chip's chain, whose CPU step runs ATen's convolution.
  m.impl("convolution_overrideable", torch::CppFunction::makeFromBoxedFunction<&boxed_fallback>());
  m.impl("convolution_backward_overrideable", torch::CppFunction::makeFromBoxedFunction<&boxed_fallback>());
}

}  // namespace torch_fl
