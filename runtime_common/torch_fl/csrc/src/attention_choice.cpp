// Which kernel serves torch.nn.functional.scaled_dot_product_attention on the chip.
//
// torch's composite asks a DispatchStub (`_fused_sdp_choice_stub`, keyed on the device type),
// not the `aten::_fused_sdp_choice` operator; unregistered, PrivateUse1 always gets the math
// decomposition (a bmm, a materialised mask, softmax, dropout and a bmm, each over the whole
// [batch, heads, queries, keys] score matrix, where CUDA runs one fused kernel). The stub asks the
// operator instead, so a chip whose spec gives `_fused_sdp_choice` a vendor kernel decides per
// call, and its answer's kernels (`_scaled_dot_product_efficient_attention` and its backward,
// or `_scaled_dot_product_fused_attention_overrideable`) run where its spec routes them. The
// flash answer is CUDA's own: torch's composite runs the CPU's flash kernel for any other device.
#include <torch_fl/fallback.h>

#include <ATen/ATen.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>

namespace torch_fl {

bool answer_attention_choice_without_a_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  static const c10::OperatorName choice{"aten::_fused_sdp_choice", ""};
  if (op.schema().operator_name() != choice) return false;
  // No kernel of the chip answered: it has no fused attention. The CPU's answer would name a
  // CPU kernel the chip lacks, so the math decomposition (on the chip's own kernels).
  torch::jit::drop(*stack, op.schema().arguments().size());
  torch::jit::push(*stack, static_cast<int64_t>(sdp::SDPBackend::math));
  return true;
}

namespace {

int64_t chip_attention_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                              const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                              std::optional<double> scale, bool enable_gqa) {
  const int64_t choice =
      at::_fused_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  // Flash on a device other than CUDA is the CPU's kernel in torch's composite: never the chip's.
  return choice == static_cast<int64_t>(sdp::SDPBackend::flash_attention)
             ? static_cast<int64_t>(sdp::SDPBackend::math) : choice;
}

}  // namespace
}  // namespace torch_fl

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_fl::chip_attention_choice)
}  // namespace at::native
