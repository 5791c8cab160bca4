#include "common.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include <memory>
#include <mutex>

namespace simnpu::detail {

Tensor TMeta::view() const {
  if (!defined) return Tensor();
  if (is_scalar) {
    Tensor t = at::scalar_tensor(value, at::TensorOptions().dtype(dtype).device(at::kCPU));
    if (wrapped) t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return t;
  }
  return at::from_blob(ptr, sizes, strides, at::TensorOptions().dtype(dtype).device(at::kCPU));
}

TMeta cap(const Tensor& t) {
  TMeta m;
  if (!t.defined()) return m;
  m.defined = true;
  m.dtype = t.scalar_type();
  if (t.device().is_cpu()) {
    TORCH_CHECK(t.dim() == 0, "simnpu: expected a simnpu tensor, got a CPU tensor of shape ",
                t.sizes(), " (only 0-dim CPU tensors are accepted, as scalars)");
    m.is_scalar = true;
    m.wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();
    m.value = t.item();
    return m;
  }
  m.ptr = t.numel() ? t.data_ptr() : nullptr;
  m.sizes = t.sizes().vec();
  m.strides = t.strides().vec();
  return m;
}

TMeta cap(const std::optional<Tensor>& t) { return t ? cap(*t) : TMeta(); }

Tensor meta(const Tensor& t) {
  if (!t.defined()) return t;
  auto dtype = t.scalar_type();
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
    // A wrapped Python number promotes like a 0-dim tensor of the default
    // dtype. It cannot stay a wrapped number: meta kernels written in Python
    // convert wrapped numbers back to Python scalars, which only works on CPU.
    if (dtype == at::kDouble) dtype = c10::typeMetaToScalarType(at::get_default_dtype());
    if (dtype == at::kComplexDouble) dtype = c10::toComplexType(c10::typeMetaToScalarType(at::get_default_dtype()));
  }
  return at::empty_strided(t.sizes(), t.strides(), at::TensorOptions().dtype(dtype).device(at::kMeta));
}

namespace {
int promotion_category(at::ScalarType t) {
  if (t == at::kBool) return 0;
  if (at::isIntegralType(t, /*includeBool=*/false)) return 1;
  if (at::isFloatingType(t)) return 2;
  return 3;
}
}  // namespace

Tensor meta_operand(const Tensor& t, const Tensor& peer) {
  // A wrapped number of a category no higher than its peer's takes part in promotion only
  // by its category (a 0-dim float16 tensor times 0.5 stays float16), which meta() above
  // loses when the peer is 0-dim too: it gets the peer's dtype instead.
  if (t.defined() && peer.defined() && t.unsafeGetTensorImpl()->is_wrapped_number() &&
      !peer.unsafeGetTensorImpl()->is_wrapped_number() &&
      promotion_category(t.scalar_type()) <= promotion_category(peer.scalar_type())) {
    return at::empty_strided(t.sizes(), t.strides(), at::TensorOptions().dtype(peer.scalar_type()).device(at::kMeta));
  }
  // A wrapped complex number with a floating peer promotes to the peer's complex type
  // (float16 * 1j is complex32), not to the default one.
  if (t.defined() && peer.defined() && t.unsafeGetTensorImpl()->is_wrapped_number() &&
      at::isComplexType(t.scalar_type()) && at::isFloatingType(peer.scalar_type())) {
    return at::empty_strided(t.sizes(), t.strides(),
                             at::TensorOptions().dtype(c10::toComplexType(peer.scalar_type())).device(at::kMeta));
  }
  return meta(t);
}

std::optional<Tensor> meta(const std::optional<Tensor>& t) {
  if (!t || !t->defined()) return t;
  return meta(*t);
}

Tensor alloc(at::IntArrayRef sizes, at::ScalarType dtype, const Tensor& like, at::MemoryFormat fmt) {
  return at::empty(sizes, like.options().dtype(dtype), fmt);
}

Tensor alloc_like_meta(const Tensor& m, const Tensor& like) {
  // The meta run's own strides: a result laid out as ATen lays it out (a transposed input gives
  // a transposed result), which torch's fake tensors, and so compiled graphs, expect.
  return at::empty_strided(m.sizes(), m.strides(), like.options().dtype(m.scalar_type()));
}

const Tensor& check_devices(const char* op, std::initializer_list<const Tensor*> ts,
                            bool allow_cpu_scalars) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t || !t->defined()) continue;
    if (t->device().is_cpu() && allow_cpu_scalars && t->dim() == 0) continue;
    TORCH_CHECK(t->device().type() == c10::DeviceType::PrivateUse1, "simnpu::", op,
                ": expected all tensors on a simnpu device, got one on ", t->device());
    if (!first) {
      first = t;
    } else {
      TORCH_CHECK(t->device() == first->device(), "simnpu::", op,
                  ": expected all tensors on the same device, got ", first->device(), " and ",
                  t->device());
    }
  }
  TORCH_CHECK(first, "simnpu::", op, ": no simnpu tensor argument");
  return *first;
}

namespace {
struct Job {
  std::function<void()> fn;
  const char* op;
  simnpuStream_t stream;
};

void trampoline(void* user) {
  std::unique_ptr<Job> job(static_cast<Job*>(user));
  std::string err;
  try {
    c10::InferenceMode guard;
    job->fn();
    return;
  } catch (const c10::Error& e) {
    err = e.what_without_backtrace();
  } catch (const std::exception& e) {
    err = e.what();
  } catch (...) {
    err = "unknown exception";
  }
  std::string msg = std::string("simnpu::") + job->op + ": " + err;
  simnpuStreamSetError(job->stream, simnpuErrorLaunchFailure, msg.c_str());
}
}  // namespace

void launch(simnpuStream_t stream, const char* op, std::function<void()> fn) {
  auto* job = new Job{std::move(fn), op, stream};
  simnpuError_t e = simnpuLaunchHostFunc(stream, &trampoline, job);
  if (e != simnpuSuccess) {
    delete job;
    TORCH_CHECK(false, "simnpu::", op, ": launch failed: ", simnpuGetErrorString(e), " (",
                simnpuGetLastErrorMessage(), ")");
  }
}

at::Generator resolve_generator(const std::optional<at::Generator>& g, const Tensor& self) {
  if (g && g->defined()) return *g;
  return at::globalContext().defaultGenerator(self.device());
}

void with_cpu_generator(const at::Generator& gen_in, const std::function<void(at::Generator&)>& fn) {
  at::Generator gen = gen_in;
  if (gen.device().is_cpu()) {  // used as is; ATen's CPU kernels lock it themselves
    fn(gen);
    return;
  }
  // Device generator: its state begins with the CPU (mt19937) layout, which is lent to a
  // CPU generator; the bytes after it (the chip's own counters) stay as they are, since
  // set_state with the CPU layout alone leaves them. Hold its lock across
  // read-advance-write so concurrent draws stay consistent.
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>();
  static const int64_t host_bytes = cpu.get_state().numel();  // the CPU layout's size: fixed
  cpu.set_state(gen.get_state().narrow(0, 0, host_bytes).clone());
  fn(cpu);
  gen.set_state(cpu.get_state());
}

}  // namespace simnpu::detail
