// Where each op ran: the vendor kernel, or a fallback step of the spec's
// chain. Every fallback is visible: counted (torch_fl.fallback_stats()),
// warned about per the spec's policy, and refused in strict mode
// (TORCH_FL_STRICT_FALLBACK=1 or torch_fl.strict_fallback()).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <atomic>
#include <map>
#include <string>
#include <vector>

namespace torch_fl {

enum class FallbackPath { vendor, triton, cpu };
const char* path_name(FallbackPath path);

struct FallbackPolicy {
  std::string chip;
  std::string spec;                      // spec file, for the error's "add this line" hint
  std::vector<std::string> default_chain;  // steps for ops the spec does not name
  std::string warn = "once";             // once | always | never
  // Ops the spec names without a vendor kernel: their own chain (and spec line).
  struct OpRoute {
    std::vector<std::string> chain;
    int line = 0;
  };
  std::map<std::string, OpRoute> routes;  // key: "add.Tensor"
};

// A composite backend configures one policy per member chip (`member`, torch_fl/driver_mux.h);
// a call takes the policy of its device's member (its first chip tensor's device, else the
// current device).
void configure_fallback(FallbackPolicy policy, int member = 0);

// A kernel the spec names but the vendor library lacks (its weak reference is
// null at load): the op takes its fallback chain, or, with `require: vendor`,
// the chip refuses to initialise (verify_required_kernels).
void note_missing_kernel(const char* op, const char* kernel, int line, bool required, int member = 0);
std::vector<std::string> missing_kernel_ops();
void verify_required_kernels();
const FallbackPolicy& fallback_policy(int member = 0);
// The member whose policy serves a boxed call: its first chip tensor's device, else the current one.
int member_of_call(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

// A per-op counter for the vendor path, registered once and bumped per call:
// the hot path is one relaxed atomic add.
class PathCounter {
 public:
  PathCounter(const char* op, FallbackPath path);
  void hit() { calls_.fetch_add(1, std::memory_order_relaxed); }
  const char* op() const { return op_; }
  FallbackPath path() const { return path_; }
  int64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  void reset() { calls_.store(0, std::memory_order_relaxed); }

 private:
  const char* op_;
  FallbackPath path_;
  std::atomic<int64_t> calls_{0};
};

// Counts a call that took a fallback path (slow path: takes a lock).
void note_fallback(const std::string& op, FallbackPath path);

// op -> path -> calls, vendor and fallback together.
std::map<std::string, std::map<std::string, int64_t>> fallback_stats();
void reset_fallback_stats();

// What the triton step can do in this process, for error messages.
void set_triton_status(std::string status);

void set_strict(bool strict);
bool strict();

// The boxed fallback registered for every op without a chip kernel.
void boxed_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// `aten::_fused_sdp_choice` reaching the fallback (the chip has no kernel of its own for it)
// answers the math decomposition and returns true (attention_choice.cpp); false for other ops.
bool answer_attention_choice_without_a_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// A vendor kernel declined the call's dtype (`ops.<op>.dtypes`): the op's chain instead. Its
// Triton step is the op's Triton kernel registered as `torchfl_<chip>_declined::<op>` (the same
// schema, torch_fl._triton_route) when the chain starts with triton; then the CPU step.
void vendor_declined(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace torch_fl
