// The chip's collective library as its torch.distributed backend: a c10d::Backend whose
// collectives call the library's hooks (the spec's distributed.library, with the fixed
// NCCL-shaped ABI of generator/collective_abi.py) on the chip's own memory, ordered on the
// chip's streams the way ProcessGroupNCCL orders NCCL's: each collective runs on a stream of
// its own that first waits for the caller's, and its Work makes the caller's stream wait for it.
#pragma once

#include <torch_fl/driver.h>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace torch_fl {

// The library's hooks. The unique id goes by pointer here: the generated code's
// `comm_init_rank` thunk copies it into the library's fixed-size struct (unique_id_bytes, known
// only to the generated code) and calls the library with it by value.
struct CollectiveApi {
  int (*get_unique_id)(void* id) = nullptr;
  int (*comm_init_rank)(void** comm, int nranks, const void* id, int rank) = nullptr;
  int (*comm_destroy)(void* comm) = nullptr;
  int (*comm_abort)(void* comm) = nullptr;
  int (*comm_get_async_error)(void* comm, int* async_error) = nullptr;
  const char* (*error_string)(int status) = nullptr;
  int (*all_reduce)(const void* sendbuff, void* recvbuff, size_t count, int datatype, int op, void* comm,
                    void* stream) = nullptr;
  int (*broadcast)(const void* sendbuff, void* recvbuff, size_t count, int datatype, int root, void* comm,
                   void* stream) = nullptr;
  int (*reduce)(const void* sendbuff, void* recvbuff, size_t count, int datatype, int op, int root, void* comm,
                void* stream) = nullptr;
  int (*all_gather)(const void* sendbuff, void* recvbuff, size_t sendcount, int datatype, void* comm,
                    void* stream) = nullptr;
  int (*reduce_scatter)(const void* sendbuff, void* recvbuff, size_t recvcount, int datatype, int op, void* comm,
                        void* stream) = nullptr;
  int (*send)(const void* sendbuff, size_t count, int datatype, int peer, void* comm, void* stream) = nullptr;
  int (*recv)(void* recvbuff, size_t count, int datatype, int peer, void* comm, void* stream) = nullptr;
  int (*group_start)() = nullptr;
  int (*group_end)() = nullptr;
  // Optional (NCCL has none): without it, all_to_all is sends and receives in one group.
  int (*all_to_all)(const void* sendbuff, void* recvbuff, size_t count, int datatype, void* comm,
                    void* stream) = nullptr;
  // Optional: the detail of a communicator's last failure (ncclGetLastError).
  const char* (*get_last_error)(void* comm) = nullptr;
};

// What the spec says about the library, baked into the generated backend.
struct CollectiveDescription {
  std::string backend;                    // the torch.distributed name, e.g. "npuccl"
  std::vector<std::string> libraries;     // file names, dlopen'ed in order (searched as the driver's)
  size_t unique_id_bytes = 0;
  int status_success = 0;
  int status_in_progress = 0;
  int status_remote_error = DriverDescription::kNoStatus;
  int status_timeout = DriverDescription::kNoStatus;
  std::vector<std::pair<c10::ScalarType, int>> dtypes;  // torch dtype -> the library's code
  std::vector<std::pair<std::string, int>> reduce_ops;  // "sum", "prod", "max", "min", "avg" -> code
  // Variables the library reads (NCCL_NVLS_ENABLE=0, ...), set before it is opened unless set already.
  std::vector<std::pair<std::string, std::string>> environment;
};

// The hooks the generated code binds (HookBinding slots point into it), and where the
// generated thunk finds the library's comm_init_rank symbol.
CollectiveApi& mutable_collective_api();

// Called once by the generated backend, at static-initialisation time: what to load. The
// library is opened at the first communicator; `hooks` are resolved into their slots then.
void configure_collectives(CollectiveDescription description, std::vector<HookBinding> hooks);
bool collectives_configured();
// Opens the library now (it is otherwise opened at the first communicator) and returns the
// paths the loader found; raises with the reason where it does not load (doctor's probe).
std::vector<std::string> load_collective_library();

// The backend `init_process_group(backend=<spec's name>)` creates for the chip's tensors.
c10::intrusive_ptr<c10d::Backend> create_collective_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                            int rank, int size,
                                                            std::chrono::milliseconds timeout);

}  // namespace torch_fl
