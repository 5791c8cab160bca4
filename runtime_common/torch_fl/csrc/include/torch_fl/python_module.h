// The Python surface every generated backend's `_C` module exposes; the
// generated device module (torch.<chip>) is written against these names.
#pragma once

#include <torch/extension.h>

namespace torch_fl {

void bind_backend(pybind11::module_& m);

}  // namespace torch_fl
