// A walk over the autograd graph a backward would run (torch_fl/coexistence.py's guard).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>

#include <optional>
#include <vector>

namespace torch_fl {

// The first device type of `types` a backward from `roots` would compute a gradient on: a
// root's own device, or any graph node's input metadata (the device of the gradient it
// receives). Nothing: the graph stays off those devices.
std::optional<c10::DeviceType> graph_reaches(const std::vector<at::Tensor>& roots,
                                             const std::vector<c10::DeviceType>& types);

}  // namespace torch_fl
