/*
 * simnpu_runtime.h -- driver runtime API of the simulated NPU SDK.
 *
 * The SDK plays the chip vendor: the generated torch backend reaches it only
 * through these C entry points (dlopen'ed by name, see specs/npu.yaml), the
 * way it would reach a real vendor's driver library. The ABI deliberately has
 * the shape of the CUDA runtime (int error codes, opaque stream/event
 * handles, memcpy kinds 0..3) so that one hook ABI serves every chip.
 */
#ifndef SIMNPU_RUNTIME_H
#define SIMNPU_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int simnpuError_t;
enum {
  simnpuSuccess = 0,
  simnpuErrorInvalidValue = 1,
  simnpuErrorMemoryAllocation = 2,   /* device capacity exhausted */
  simnpuErrorInvalidDevice = 3,
  simnpuErrorInvalidDevicePointer = 4,/* pointer is not a live device allocation */
  simnpuErrorInvalidResourceHandle = 5,
  simnpuErrorNotReady = 6,            /* stream/event query: work still pending */
  simnpuErrorLaunchFailure = 7,       /* a kernel failed (sticky per stream until synchronized) */
  simnpuErrorDeviceLost = 8,
  simnpuErrorTimeout = 9,
  simnpuErrorNotInitialized = 10,
};

typedef struct simnpuStream_st* simnpuStream_t; /* NULL = the current device's default stream */
typedef struct simnpuEvent_st* simnpuEvent_t;

typedef enum {
  simnpuMemcpyHostToHost = 0,
  simnpuMemcpyHostToDevice = 1,
  simnpuMemcpyDeviceToHost = 2,
  simnpuMemcpyDeviceToDevice = 3,
} simnpuMemcpyKind;

enum { simnpuEventDefault = 0, simnpuEventDisableTiming = 2 };

/* Version encoded as major*1000 + minor*10 (2.1 -> 2010), like CUDA's. */
simnpuError_t simnpuDriverGetVersion(int* version);
const char* simnpuGetErrorString(simnpuError_t error);
const char* simnpuGetErrorName(simnpuError_t error);

/* Devices: count from SIMNPU_DEVICE_COUNT (default 2). Current device is per host thread. */
simnpuError_t simnpuGetDeviceCount(int* count);
simnpuError_t simnpuSetDevice(int device);
simnpuError_t simnpuGetDevice(int* device);
simnpuError_t simnpuDeviceSynchronize(void);

/* Device memory: capacity per device from SIMNPU_MEMORY_CAPACITY (bytes; suffixes K/M/G; default 8G). */
simnpuError_t simnpuMalloc(void** ptr, size_t size);     /* on the current device; 256-byte aligned */
simnpuError_t simnpuFree(void* ptr);                     /* synchronizes the owning device first */
simnpuError_t simnpuMemGetInfo(size_t* free_bytes, size_t* total_bytes); /* current device */
simnpuError_t simnpuPointerGetDevice(const void* ptr, int* device);      /* InvalidDevicePointer if not device memory */

/* Pinned host memory (page-locked in a real chip; tracked here so copies can tell it apart). */
simnpuError_t simnpuMallocHost(void** ptr, size_t size);
simnpuError_t simnpuFreeHost(void* ptr);
simnpuError_t simnpuHostPointerIsPinned(const void* ptr, int* is_pinned);

/* Copies check that each side is what `kind` says (device allocation vs host). */
simnpuError_t simnpuMemcpy(void* dst, const void* src, size_t count, simnpuMemcpyKind kind);
simnpuError_t simnpuMemcpyAsync(void* dst, const void* src, size_t count, simnpuMemcpyKind kind,
                                simnpuStream_t stream);
simnpuError_t simnpuMemset(void* dst, int value, size_t count);
simnpuError_t simnpuMemsetAsync(void* dst, int value, size_t count, simnpuStream_t stream);

/* Streams: each runs its queued work in order on a worker thread of its device. */
simnpuError_t simnpuStreamCreate(simnpuStream_t* stream);   /* on the current device */
simnpuError_t simnpuStreamDestroy(simnpuStream_t stream);
simnpuError_t simnpuStreamSynchronize(simnpuStream_t stream);
simnpuError_t simnpuStreamQuery(simnpuStream_t stream);    /* Success, NotReady, or DeviceLost */
simnpuError_t simnpuStreamWaitEvent(simnpuStream_t stream, simnpuEvent_t event, unsigned int flags); /* flags: 0 */
simnpuError_t simnpuStreamGetDevice(simnpuStream_t stream, int* device);
typedef void (*simnpuHostFn_t)(void* user_data);
/* Queue a host function: how the kernel library runs "device code" on a stream. */
simnpuError_t simnpuLaunchHostFunc(simnpuStream_t stream, simnpuHostFn_t fn, void* user_data);

/* Events. */
simnpuError_t simnpuEventCreate(simnpuEvent_t* event);
simnpuError_t simnpuEventCreateWithFlags(simnpuEvent_t* event, unsigned int flags);
simnpuError_t simnpuEventDestroy(simnpuEvent_t event);
simnpuError_t simnpuEventRecord(simnpuEvent_t event, simnpuStream_t stream);
simnpuError_t simnpuEventQuery(simnpuEvent_t event);        /* Success or NotReady */
simnpuError_t simnpuEventSynchronize(simnpuEvent_t event);
simnpuError_t simnpuEventElapsedTime(float* ms, simnpuEvent_t start, simnpuEvent_t end);

/* Utilization in percent over the last second, for monitors. */
simnpuError_t simnpuDeviceGetUtilization(int device, int* percent);

/* --- SDK-internal extensions (used by the kernel library and tests) --- */
/* A host function (or anything running on a stream's worker) reports a failure
 * of queued work: the first error is sticky on the stream and returned (then
 * cleared) by the next simnpuStreamSynchronize / simnpuDeviceSynchronize.
 * stream NULL: the stream currently executing on this worker thread, else the
 * current device's default stream. message may be NULL. */
simnpuError_t simnpuStreamSetError(simnpuStream_t stream, simnpuError_t error, const char* message);
/* Thread-local detail text of the last failure returned to this thread
 * (e.g. the text of the kernel exception behind a sticky LaunchFailure). */
const char* simnpuGetLastErrorMessage(void);
/* Number of streams created (and not destroyed) on the device, default stream included. */
simnpuError_t simnpuDeviceGetStreamCount(int device, int* count);

#ifdef __cplusplus
}
#endif
#endif /* SIMNPU_RUNTIME_H */
