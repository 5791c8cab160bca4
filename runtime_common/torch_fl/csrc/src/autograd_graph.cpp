#include <torch_fl/autograd_graph.h>

#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <unordered_set>

namespace torch_fl {

std::optional<c10::DeviceType> graph_reaches(const std::vector<at::Tensor>& roots,
                                             const std::vector<c10::DeviceType>& types) {
  auto wanted = [&](c10::DeviceType type) { return std::find(types.begin(), types.end(), type) != types.end(); };
  std::vector<torch::autograd::Node*> stack;
  std::unordered_set<torch::autograd::Node*> seen;
  for (const at::Tensor& root : roots) {
    if (!root.defined()) continue;
    if (wanted(root.device().type())) return root.device().type();
    torch::autograd::Node* node = root.grad_fn().get();
    if (node != nullptr && seen.insert(node).second) stack.push_back(node);
  }
  // (The roots hold their nodes, and the nodes the rest: the graph lives through the walk.)
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    for (uint32_t i = 0; i < node->num_inputs(); ++i) {
      const c10::DeviceType type = node->input_metadata(i).device().type();
      if (wanted(type)) return type;
    }
    for (const torch::autograd::Edge& edge : node->next_edges()) {
      torch::autograd::Node* next = edge.function.get();
      if (next != nullptr && seen.insert(next).second) stack.push_back(next);
    }
  }
  return std::nullopt;
}

}  // namespace torch_fl
