#include <ATen/ScalarOps.h>
#include <torch_fl/autograd_graph.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch_fl/caching_allocator.h>
#include <torch_fl/collectives.h>
#include <torch_fl/driver.h>
#include <torch_fl/driver_mux.h>
#include <torch_fl/fallback.h>
#include <torch_fl/rng.h>
#include <torch_fl/host_allocator.h>
#include <torch_fl/python_module.h>
#include <torch_fl/streams.h>
#include <torch_fl/cuda_launch.h>
#include <torch_fl/triton_launch.h>

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <pybind11/chrono.h>

namespace py = pybind11;

namespace torch_fl {

namespace {

// A Python kernel receives a wrapped number (the `2.0` of `x * 2.0`, a 0-dim CPU tensor
// flagged as such) as a Python number. Handing the call on to the next step needs it back as
// a wrapped-number tensor where the schema wants a Tensor: it promotes by category only.
py::tuple rewrap_numbers(const c10::FunctionSchema& schema, const py::args& args) {
  py::list out;
  for (size_t i = 0; i < args.size(); ++i) {
    py::object value = args[i];
    const bool wants_tensor = i < schema.arguments().size() &&
                              schema.arguments()[i].real_type()->kind() == c10::TypeKind::TensorType;
    if (wants_tensor && (PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr()) || PyComplex_Check(value.ptr()))) {
      const c10::Scalar scalar = PyBool_Check(value.ptr())
                                     ? c10::Scalar(value.ptr() == Py_True)
                                     : torch::jit::toIValue(value, c10::NumberType::get()).toScalar();
      at::Tensor wrapped = c10::scalar_to_tensor(scalar);
      wrapped.unsafeGetTensorImpl()->set_wrapped_number(true);
      value = py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(wrapped)));
    }
    out.append(value);
  }
  return py::tuple(out);
}

}  // namespace

namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;

py::dict stat_dict(const Stat& stat) {
  py::dict d;
  d["current"] = stat.current;
  d["peak"] = stat.peak;
  d["allocated"] = stat.allocated;
  d["freed"] = stat.freed;
  return d;
}

py::dict stat_array_dict(const StatArray& stats) {
  static const char* names[] = {"all", "small_pool", "large_pool"};
  py::dict d;
  for (size_t i = 0; i < stats.size(); ++i) d[names[i]] = stat_dict(stats[i]);
  return d;
}

// Same nesting as torch.cuda.memory._memory_stats_as_nested_dict.
py::dict memory_stats(c10::DeviceIndex device) {
  const auto stats = CachingDeviceAllocator::instance().getDeviceStats(device);
  py::dict d;
  d["allocation"] = stat_array_dict(stats.allocation);
  d["segment"] = stat_array_dict(stats.segment);
  d["active"] = stat_array_dict(stats.active);
  d["inactive_split"] = stat_array_dict(stats.inactive_split);
  d["allocated_bytes"] = stat_array_dict(stats.allocated_bytes);
  d["reserved_bytes"] = stat_array_dict(stats.reserved_bytes);
  d["active_bytes"] = stat_array_dict(stats.active_bytes);
  d["inactive_split_bytes"] = stat_array_dict(stats.inactive_split_bytes);
  d["requested_bytes"] = stat_array_dict(stats.requested_bytes);
  d["num_alloc_retries"] = stats.num_alloc_retries;
  d["num_ooms"] = stats.num_ooms;
  d["num_sync_all_streams"] = stats.num_sync_all_streams;
  d["num_device_alloc"] = stats.num_device_alloc;
  d["num_device_free"] = stats.num_device_free;
  return d;
}

py::tuple stream_tuple(const c10::Stream& s) {
  return py::make_tuple(s.id(), s.device_index(), static_cast<int>(s.device_type()));
}

c10::Stream unpack_stream(int64_t stream_id, c10::DeviceIndex device_index, int device_type) {
  return c10::Stream::unpack3(stream_id, device_index, static_cast<c10::DeviceType>(device_type));
}

// torch_fl.errors' classes, one per Fault, looked up once (they live as long as the process).
PyObject* fault_classes[3] = {nullptr, nullptr, nullptr};

// Raises the named Python exception through torch's python_error, which torch's bindings (and
// the autograd engine, across threads) turn back into the Python exception itself.
[[noreturn]] void throw_python_fault(Fault fault, int status, const std::string& message) {
  py::gil_scoped_acquire gil;
  PyObject* cls = fault_classes[static_cast<int>(fault)];
  PyObject* error = PyObject_CallFunction(cls, "s", message.c_str());
  if (error != nullptr) {
    const auto& description = Driver::instance().description();
    PyObject_SetAttrString(error, "chip", py::str(description.chip).ptr());
    PyObject_SetAttrString(error, "status", py::int_(status).ptr());
    PyErr_SetObject(cls, error);
    Py_DECREF(error);
  }
  python_error e;
  e.persist();
  throw e;
}

void install_fault_classes() {
  py::module_ errors = py::module_::import("torch_fl.errors");
  const char* names[3] = {"KernelError", "DeviceLostError", "StreamTimeoutError"};
  for (int i = 0; i < 3; ++i) fault_classes[i] = py::object(errors.attr(names[i])).release().ptr();
  set_fault_thrower(&throw_python_fault);
}

}  // namespace

void bind_backend(py::module_& m) {
  install_fault_classes();
  m.def("_lazy_init", [] { Driver::instance().ensure_loaded(); }, "Load the chip's driver (once); raises on failure");
  m.def("_driver_load_error", [] {
    return Driver::instance().try_load() ? std::string() : Driver::instance().load_error();
  });
  m.def("_is_driver_loaded", [] { return Driver::instance().loaded(); });
  m.def("_in_bad_fork", [] { return Driver::instance().in_bad_fork(); });
  m.def("_driver_libraries", [] { return Driver::instance().loaded_library_paths(); });
  m.def("_driver_version", [] {
    Driver::instance().ensure_loaded();
    return Driver::instance().runtime_version_code();
  });
  m.def("_built_driver_version", [] { return Driver::instance().description().built_version; });

  m.def("_has_collective_library", [] { return collectives_configured(); });
  m.def("_collective_library", [] { return load_collective_library(); });
  m.def(
      "_create_collective_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout) {
        return create_collective_backend(store, rank, size, timeout);
      },
      "The chip's torch.distributed backend over its collective library (distributed.library)");
  m.def("device_count", [] { return static_cast<int>(device_count()); });
  m.def("current_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device", [](int device) {
    TORCH_CHECK(device >= 0 && device < device_count(), "invalid ", Driver::instance().description().chip,
                " device ", device, " (", static_cast<int>(device_count()), " available)");
    set_current_device(device);
  });
  m.def("synchronize", [](int device) { synchronize_device(device); });

  m.def("memory_stats", [](int device) { return memory_stats(device); });
  m.def("empty_cache", [] { CachingDeviceAllocator::instance().emptyCache(); });
  m.def("reset_peak_memory_stats", [](int device) { CachingDeviceAllocator::instance().resetPeakStats(device); });
  m.def("reset_accumulated_memory_stats",
        [](int device) { CachingDeviceAllocator::instance().resetAccumulatedStats(device); });
  m.def("mem_get_info", [](int device) { return CachingDeviceAllocator::instance().getMemoryInfo(device); });
  m.def("empty_host_cache", [] { PinnedHostAllocator::instance().empty_cache(); });
  m.def("set_memory_fraction", [](double fraction, int device) {
    CachingDeviceAllocator::instance().set_memory_fraction(fraction, device);
  });
  m.def("memory_fraction", [](int device) { return CachingDeviceAllocator::instance().memory_fraction(device); });
  // torch.cuda.memory_snapshot()'s segment dictionaries (the fields a generic reader uses).
  m.def("memory_snapshot", [] {
    py::list segments;
    for (const auto& segment : CachingDeviceAllocator::instance().snapshot()) {
      py::dict s;
      s["device"] = static_cast<int>(segment.device);
      s["address"] = segment.address;
      s["total_size"] = segment.total_size;
      s["allocated_size"] = segment.allocated_size;
      s["active_size"] = segment.allocated_size;
      s["stream"] = segment.stream;
      s["segment_type"] = segment.small ? "small" : "large";
      py::list blocks;
      for (const auto& block : segment.blocks) {
        py::dict b;
        b["address"] = block.address;
        b["size"] = block.size;
        b["requested_size"] = block.requested;
        b["state"] = block.allocated ? "active_allocated" : "inactive";
        blocks.append(b);
      }
      s["blocks"] = blocks;
      segments.append(s);
    }
    return segments;
  });

  m.def("default_generator", [](int device) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(default_generator(device)));
  });

  // (seed, offset) of the Philox counter for a kernel drawing `increment` numbers on the chip
  // (the Triton random family): from `generator`, else the device's default one; advances it.
  m.def("_philox_engine_inputs", [](py::object generator, int device, uint64_t increment) {
    at::Generator gen = generator.is_none() ? default_generator(device) : THPGenerator_Unwrap(generator.ptr());
    auto* impl = dynamic_cast<DeviceGenerator*>(gen.unsafeGetGeneratorImpl());
    TORCH_CHECK(impl, "expected a generator of the ", Driver::instance().description().chip, " device, got one of ",
                gen.device());
    std::lock_guard<std::mutex> lock(gen.mutex());
    return impl->philox_engine_inputs(increment);
  });

  m.def("current_stream", [](int device) { return stream_tuple(current_stream(device)); });
  m.def("default_stream", [](int device) { return stream_tuple(default_stream(device)); });
  // The driver handle of the current stream of the current device: what a compiled
  // Triton kernel is launched on when the chip's driver is the GPU runtime Triton targets.
  m.def("_current_native_stream", [] { return reinterpret_cast<uintptr_t>(native_stream(current_stream(-1))); });
  m.def("set_stream", [](int64_t stream_id, int device_index, int device_type) {
    set_current_stream(unpack_stream(stream_id, device_index, device_type));
  });

  m.def("fallback_stats", [] { return fallback_stats(); });
  m.def("_note_path", [](const std::string& op, const std::string& path) {
    TORCH_CHECK(path == "triton" || path == "cpu", "unknown path ", path);
    note_fallback(op, path == "triton" ? FallbackPath::triton : FallbackPath::cpu);
  });
  // The step after `triton` for a call whose Triton kernel declined its inputs
  // (torch_fl.triton_ops.Unsupported): the same boxed fallback an op without any
  // kernel takes, so policy, strict mode, warnings and counters all apply.
  m.def("_next_step", [](const std::string& name, const std::string& overload, py::args args,
                         const py::kwargs& kwargs) {
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
    auto stack = torch::jit::createStackForSchema(op.schema(), rewrap_numbers(op.schema(), args), kwargs,
                                                  std::nullopt);
    {
      py::gil_scoped_release no_gil;
      boxed_fallback(op, &stack);
    }
    return torch::jit::createPyObjectForStack(std::move(stack));
  });
  // Triton kernels launched from C++ (torch_fl/_triton_fast.py, triton_launch.h).
  m.def("_triton_launch_available", [] {
    std::string why_not;
    const bool available = cuda_launch_available(&why_not);
    return py::make_tuple(available, why_not);
  });
  m.def("_register_fast_triton_op", &register_fast_triton_op, py::arg("name"), py::arg("overload"),
        py::arg("mirror"), py::arg("strided_mirror") = "");
  m.def("_record_triton_launch",
        [](const at::Tensor& out, bool inplace, uintptr_t function, int64_t threads, int64_t shared_bytes,
           int64_t elements_per_program, const std::vector<std::tuple<int64_t, int64_t, int>>& args) {
          std::vector<LaunchArg> launch_args;
          for (const auto& [source, value, bytes] : args) {
            launch_args.push_back({static_cast<LaunchArgSource>(source), value, bytes});
          }
          std::string why_not;
          const bool recorded = record_triton_launch(out, inplace, function, threads, shared_bytes,
                                                     elements_per_program, launch_args, &why_not);
          return py::make_tuple(recorded, why_not);
        });
  m.def("_mark_triton_call_strided", &mark_triton_call_strided);
  // The guard against backward over native tensors (torch_fl/coexistence.py), in C++: the
  // walk costs some 2 us a node from Python, a millisecond per training step of a small LLM.
  m.def("_autograd_graph_reaches", [](const std::vector<at::Tensor>& roots, const std::vector<std::string>& types) {
    std::vector<c10::DeviceType> wanted;
    for (const std::string& type : types) wanted.push_back(c10::Device(type).type());
    const std::optional<c10::DeviceType> found = graph_reaches(roots, wanted);
    return found ? std::optional<std::string>(c10::DeviceTypeName(*found, /*lower_case=*/true)) : std::nullopt;
  });
  m.def("_register_fast_foreach_op", &register_fast_foreach_op, py::arg("name"), py::arg("overload"),
        py::arg("mirror"));
  m.def("_record_foreach_launch",
        [](uintptr_t function, int64_t threads, int64_t shared_bytes, const at::Tensor& rows, int64_t chunk,
           const std::vector<std::tuple<int64_t, int64_t, int>>& params) {
          std::vector<LaunchArg> launch_params;
          for (const auto& [source, value, bytes] : params) {
            launch_params.push_back({static_cast<LaunchArgSource>(source), value, bytes});
          }
          std::string why_not;
          const bool recorded = record_foreach_launch(function, threads, shared_bytes, rows, chunk, launch_params,
                                                      &why_not);
          return py::make_tuple(recorded, why_not);
        });
  m.def("_register_fast_program_op", &register_fast_program_op, py::arg("name"), py::arg("overload"),
        py::arg("mirror"));
  m.def("_record_program_launch",
        [](uintptr_t function, std::array<int64_t, 3> grid, int64_t threads, int64_t shared_bytes,
           const std::vector<std::tuple<int, int64_t, int>>& params) {
          std::vector<ProgramLaunchParam> launch_params;
          for (const auto& [source, value, bytes] : params) {
            TORCH_CHECK(source >= 0 && source <= 4, "bad parameter source ", source);
            launch_params.push_back({static_cast<ProgramParamSource>(source), value, bytes});
          }
          std::string why_not;
          const bool recorded = record_program_launch(function, grid, threads, shared_bytes, launch_params, &why_not);
          return py::make_tuple(recorded, why_not);
        });
  m.def("_fast_program_voids", [] {
    py::dict voids;
    for (const auto& [op, why, keys] : fast_program_voids()) {
      if (!voids.contains(op)) voids[py::str(op)] = py::dict();
      voids[py::str(op)].cast<py::dict>()[py::str(why)] = keys;
    }
    return voids;
  });
  m.def("_record_program_rng", &record_program_rng, py::arg("device"), py::arg("increment"), py::arg("seed"),
        py::arg("offset"));
  m.def("_refuse_program_recording", [](const std::string& why) { refuse_program_recording(why); });
  m.def("_fast_triton_stats", [] {
    py::dict stats;
    for (const auto& entry : fast_triton_stats()) {
      py::dict d;
      d["replayed"] = entry.replayed;
      d["to_python"] = entry.to_python;
      d["recipes"] = entry.recipes;
      stats[py::str(entry.op)] = d;
    }
    return stats;
  });
  m.def("_missing_kernel_ops", [] { return missing_kernel_ops(); });
  // A composite backend's members (torch_fl/driver_mux.h); a single chip is its own one member.
  m.def("_member_of", [](int device) {
    Driver::instance().ensure_loaded();
    return mux_member_of(device);
  });
  m.def("_member_count", [] { return Driver::instance().composite() ? static_cast<int>(member_drivers().size()) : 1; });
  m.def("_set_triton_status", [](const std::string& status) { set_triton_status(status); });
  m.def("reset_fallback_stats", [] { reset_fallback_stats(); });
  m.def("set_strict_fallback", [](bool value) { set_strict(value); });
  m.def("strict_fallback", [] { return strict(); });
}

}  // namespace torch_fl

// Every chip's extension module is `<package>._C`, and the same: the runtime's Python surface.
// Defined here, once, rather than in each generated package.
PYBIND11_MODULE(_C, m) {
  m.doc() = "The torch_fl runtime of a generated chip backend (the chip's package names it)";
  torch_fl::bind_backend(m);
  m.def("_set_driver_search_paths", [](std::vector<std::string> paths) {
    torch_fl::Driver::instance().set_search_paths(std::move(paths));
  });
}
