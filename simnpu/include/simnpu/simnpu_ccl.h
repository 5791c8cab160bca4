/*
 * simnpu_ccl.h -- collective communication library of the simulated NPU SDK.
 *
 * The SDK's counterpart of NCCL: communicators of ranks that are processes (or threads) on one
 * host, meeting by a unique id in POSIX shared memory; collectives on simnpu device memory,
 * ordered on simnpu streams and asynchronous. The API has NCCL's shape on purpose (argument
 * order, status codes 0-7, dtype codes 0-9, reduce ops 0-4), so that one hook ABI of the
 * torch backend serves this library and NCCL alike. See simnpu/README.md ("Collective library").
 */
#ifndef SIMNPU_CCL_H
#define SIMNPU_CCL_H

#include <stddef.h>

#include "simnpu/simnpu_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIMCCL_MAJOR 1
#define SIMCCL_MINOR 0
#define SIMCCL_PATCH 0
#define SIMCCL_VERSION_CODE (SIMCCL_MAJOR * 10000 + SIMCCL_MINOR * 100 + SIMCCL_PATCH) /* as NCCL's */

#define SIMCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[SIMCCL_UNIQUE_ID_BYTES]; } simcclUniqueId;
typedef struct simcclComm* simcclComm_t;

typedef enum {
  simcclSuccess = 0,
  simcclUnhandledError = 1,
  simcclSystemError = 2,      /* an OS call failed (shm_open, mmap, ...) */
  simcclInternalError = 3,
  simcclInvalidArgument = 4,  /* bad argument at call time (pointer, count, dtype/op, rank) */
  simcclInvalidUsage = 5,     /* ranks disagree (order, op, count, root), or an aborted/broken comm */
  simcclRemoteError = 6,      /* a peer died, aborted or failed */
  simcclInProgress = 7,
  simcclTimeout = 8,          /* a wait passed SIMCCL_TIMEOUT_MS (not in NCCL) */
} simcclResult_t;

typedef enum {
  simcclInt8 = 0, simcclUint8 = 1, simcclInt32 = 2, simcclUint32 = 3, simcclInt64 = 4,
  simcclUint64 = 5, simcclFloat16 = 6, simcclFloat32 = 7, simcclFloat64 = 8, simcclBfloat16 = 9,
  /* beyond NCCL: */
  simcclBool = 10, simcclInt16 = 11, simcclComplex64 = 12, simcclComplex128 = 13,
} simcclDataType_t;

typedef enum { simcclSum = 0, simcclProd = 1, simcclMax = 2, simcclMin = 3, simcclAvg = 4 } simcclRedOp_t;

simcclResult_t simcclGetVersion(int* version);
simcclResult_t simcclGetUniqueId(simcclUniqueId* id);
/* Collective: every rank calls it with the same id and nranks; returns when all nranks joined
   (or fails with simcclTimeout after SIMCCL_TIMEOUT_MS, naming who is missing). The
   communicator is bound to the caller's current simnpu device. */
simcclResult_t simcclCommInitRank(simcclComm_t* comm, int nranks, simcclUniqueId id, int rank);
simcclResult_t simcclCommDestroy(simcclComm_t comm);   /* waits for its queued work */
simcclResult_t simcclCommAbort(simcclComm_t comm);     /* never blocks; queued work fails; peers see a remote error */
simcclResult_t simcclCommGetAsyncError(simcclComm_t comm, simcclResult_t* async_error);
simcclResult_t simcclCommCount(simcclComm_t comm, int* count);
simcclResult_t simcclCommUserRank(simcclComm_t comm, int* rank);
simcclResult_t simcclCommDevice(simcclComm_t comm, int* device);   /* NCCL: ncclCommCuDevice */
const char* simcclGetErrorString(simcclResult_t result);           /* static */
const char* simcclGetLastError(simcclComm_t comm);   /* detail of the last failure (comm may be NULL: this thread's) */

/* Stream-ordered and asynchronous: each call validates its arguments, enqueues the collective
   on `stream` (a simnpu stream of the communicator's device; NULL = that device's default
   stream) with simnpuLaunchHostFunc, and returns at once. Buffers are simnpu device pointers on
   the communicator's device. In-place (sendbuff == recvbuff, or NCCL's in-place offsets for
   all_gather/reduce_scatter) is allowed. */
simcclResult_t simcclAllReduce(const void* sendbuff, void* recvbuff, size_t count, simcclDataType_t datatype,
                               simcclRedOp_t op, simcclComm_t comm, simnpuStream_t stream);
simcclResult_t simcclBroadcast(const void* sendbuff, void* recvbuff, size_t count, simcclDataType_t datatype,
                               int root, simcclComm_t comm, simnpuStream_t stream);
simcclResult_t simcclReduce(const void* sendbuff, void* recvbuff, size_t count, simcclDataType_t datatype,
                            simcclRedOp_t op, int root, simcclComm_t comm, simnpuStream_t stream);
simcclResult_t simcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, simcclDataType_t datatype,
                               simcclComm_t comm, simnpuStream_t stream);
simcclResult_t simcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, simcclDataType_t datatype,
                                   simcclRedOp_t op, simcclComm_t comm, simnpuStream_t stream);
simcclResult_t simcclAllToAll(const void* sendbuff, void* recvbuff, size_t count /* per peer */,
                              simcclDataType_t datatype, simcclComm_t comm, simnpuStream_t stream);
simcclResult_t simcclSend(const void* sendbuff, size_t count, simcclDataType_t datatype, int peer,
                          simcclComm_t comm, simnpuStream_t stream);
simcclResult_t simcclRecv(void* recvbuff, size_t count, simcclDataType_t datatype, int peer,
                          simcclComm_t comm, simnpuStream_t stream);
/* Calls between GroupStart and GroupEnd (per host thread, nestable) are fused: nothing is
   enqueued until the outermost GroupEnd, which enqueues them as one unit per (comm, stream), so a
   send and a recv between two ranks in one group cannot deadlock. */
simcclResult_t simcclGroupStart(void);
simcclResult_t simcclGroupEnd(void);

#ifdef __cplusplus
}
#endif
#endif /* SIMNPU_CCL_H */
