// A composite backend's driver: several chips' drivers behind one DriverApi (docs/multichip.md).
//
// The composite's devices are its members' devices in member order (member 0's devices
// first). Every hook is routed to the member that owns what it touches: the current
// device (set_device, malloc, stream_create, ...), the stream (stream and async copy
// hooks: a stream handle is the member's own, so vendor kernels receive their driver's
// streams), the pointer (free, synchronous copies), the event (bound to the member of the
// stream it was last recorded on). Work between members meets on the host: a stream of one
// member waiting for another member's event waits on the host, and a copy between two
// members' memory is staged through host memory, complete when the hook returns.
//
// Statuses are the composite's own: success, not_ready, out_of_memory, launch_failure,
// device_lost and timeout are each member's declared statuses mapped to one code
// (MuxStatus); any other status gets a code of its own whose error_string names the member.
#pragma once

#include <torch_fl/driver.h>

#include <string>
#include <vector>

namespace torch_fl {

enum MuxStatus : int {
  kMuxSuccess = 0,
  kMuxNotReady = 1,
  kMuxOutOfMemory = 2,
  kMuxLaunchFailure = 3,
  kMuxDeviceLost = 4,
  kMuxTimeout = 5,
  kMuxMisuse = 6,        // a request no member can serve (e.g. elapsed time between two members' events)
  kMuxFirstOther = 16,   // codes from here on: a member's other statuses, interned
};

// Memory copy kinds of the composite (its description's memcpy_* values).
enum MuxMemcpyKind : int { kMuxHostToHost = 0, kMuxHostToDevice = 1, kMuxDeviceToHost = 2, kMuxDeviceToDevice = 3 };

// One member: its loaded driver (hooks resolved, version checked) and what its spec says.
struct MuxMember {
  const DriverApi* api;
  const DriverDescription* description;
  int devices = 0;  // the member's device count when the composite loaded
};

// Installs the members (in device order) and returns the hook table that routes to them.
// `version_code` is what the composite's driver_version hook reports.
DriverApi configure_driver_mux(std::vector<MuxMember> members, int version_code);

// The member serving composite device `device` (-1 when out of range), and its index there.
int mux_member_of(int device);
int mux_local_index(int device);
int mux_member_count();
// The composite device index of `member`'s first device.
int mux_first_device(int member);

}  // namespace torch_fl
