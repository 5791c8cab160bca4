// simnpu collective library (libsimnpu_ccl.so): NCCL-shaped collectives between ranks that are
// processes (or threads) of one host.
//
// Ranks meet in a POSIX shared-memory segment named after the unique id. The segment holds a
// control block (per-rank pid, barrier generation, doorbell, op descriptors), one data slot per
// rank (two halves, used alternately by successive barriers) and one channel per ordered pair of
// ranks for send/recv. A collective runs as a host function on a simnpu stream: per chunk, each
// rank copies its contribution into its slot half, all ranks meet at a barrier (atomic counters in
// shared memory; short spin, then yield, then a futex wait), and each rank reduces or gathers from
// the slots into its receive buffer. The halves alternate chunk by chunk, so one barrier per chunk
// suffices: a rank writes the half of chunk k again for chunk k+2 only after passing the barrier of
// chunk k+1, which every rank reaches only after reading what chunk k published (the same holds
// for the descriptors, by barrier parity). Large all_reduces split each chunk among the ranks
// (each reduces its part from its own buffer and the peers' slots, then all gather the parts:
// two barriers per chunk, less memory traffic and the reduction spread over the ranks). Every wait is bounded (SIMCCL_TIMEOUT_MS) and checks
// the ranks it waits for (exited, destroyed, aborted), so a dead peer is an error, never a hang.
#include "simnpu/simnpu_ccl.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <complex>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

thread_local std::string tls_error;   // this thread's last failure (simcclGetLastError(NULL))
thread_local std::string tls_return;  // storage behind the pointer simcclGetLastError returns

simcclResult_t fail(simcclResult_t code, std::string msg) {
  tls_error = std::move(msg);
  return code;
}

// ------------------------------------------------------------------ configuration (strict)

bool parse_whole(const std::string& text, long long lo, long long hi, long long* out) {
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])))) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || end != text.c_str() + text.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// A whole number of bytes, optionally with a K/M/G suffix (powers of 1024).
bool parse_size(const std::string& text, long long* out) {
  std::string s = text;
  long long mul = 1;
  if (!s.empty()) {
    char last = s.back();
    if (last == 'K' || last == 'k') mul = 1ll << 10;
    if (last == 'M' || last == 'm') mul = 1ll << 20;
    if (last == 'G' || last == 'g') mul = 1ll << 30;
    if (mul != 1) s.pop_back();
  }
  long long v = 0;
  if (!parse_whole(s, 0, (1ll << 42) / mul, &v)) return false;
  *out = v * mul;
  return true;
}

struct FaultCfg {
  long long rank = -1;        // -1: every rank
  long long die_after = -1;   // the process _exit(1)s when its operation #die_after (from 0) starts
  long long stall_after = -1; // operation #stall_after (from 0) sleeps stall_ms before it runs
  long long stall_ms = 2000;
};

struct Config {
  long long timeout_ms = 30000;
  long long slot_bytes = 2ll << 20;
  long long split_bytes = 64 << 10;
  FaultCfg faults;
};

simcclResult_t read_config(Config* c) {
  if (const char* t = std::getenv("SIMCCL_TIMEOUT_MS"); t && *t) {
    if (!parse_whole(t, 1, 24ll * 3600 * 1000, &c->timeout_ms))
      return fail(simcclInvalidArgument, std::string("SIMCCL_TIMEOUT_MS: '") + t +
                                             "' is not a whole number of milliseconds from 1 to 86400000");
  }
  if (const char* t = std::getenv("SIMCCL_SLOT_BYTES"); t && *t) {
    long long v = 0;
    if (!parse_size(t, &v) || v < 4096 || v > (4ll << 30))
      return fail(simcclInvalidArgument, std::string("SIMCCL_SLOT_BYTES: '") + t +
                                             "' is not a size from 4096 bytes to 4G (suffix K/M/G allowed)");
    c->slot_bytes = (v + 4095) / 4096 * 4096;
  }
  if (const char* t = std::getenv("SIMCCL_SPLIT_BYTES"); t && *t) {
    if (!parse_size(t, &c->split_bytes))
      return fail(simcclInvalidArgument, std::string("SIMCCL_SPLIT_BYTES: '") + t +
                                             "' is not a size in bytes (suffix K/M/G allowed)");
  }
  if (const char* t = std::getenv("SIMCCL_FAULTS"); t && *t) {
    std::string spec(t);
    size_t pos = 0;
    while (pos <= spec.size()) {
      size_t comma = spec.find(',', pos);
      std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      pos = comma == std::string::npos ? spec.size() + 1 : comma + 1;
      size_t eq = item.find('=');
      if (eq == std::string::npos)
        return fail(simcclInvalidArgument, "SIMCCL_FAULTS: item '" + item + "' is not key=value");
      std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      long long* dst = nullptr;
      if (key == "rank") dst = &c->faults.rank;
      else if (key == "die_after") dst = &c->faults.die_after;
      else if (key == "stall_after") dst = &c->faults.stall_after;
      else if (key == "stall_ms") dst = &c->faults.stall_ms;
      else
        return fail(simcclInvalidArgument, "SIMCCL_FAULTS: unknown key '" + key +
                                               "' (known: rank, die_after, stall_after, stall_ms)");
      if (!parse_whole(value, 0, 1ll << 40, dst))
        return fail(simcclInvalidArgument,
                    "SIMCCL_FAULTS: " + key + "='" + value + "' is not a whole number (from 0)");
    }
  }
  return simcclSuccess;
}

std::atomic<long long> g_fault_ops{0};  // operations run by this process on comms the faults apply to

// ------------------------------------------------------------------ shared memory layout

constexpr uint64_t kMagic = 0x53494d43434c3031ull;  // "SIMCCL01"
constexpr char kIdMagic[8] = {'S', 'I', 'M', 'C', 'C', 'L', 'I', 'D'};

enum Kind : uint32_t { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll, kSend, kRecv };
const char* kind_name(uint32_t k) {
  static const char* names[] = {"all_reduce", "broadcast", "reduce", "all_gather",
                                "reduce_scatter", "all_to_all", "send", "recv"};
  return k < 8 ? names[k] : "?";
}

struct OpDesc {
  uint64_t seq;
  uint32_t kind, dtype, op;
  int32_t root;
  uint64_t count;
};

struct alignas(64) RankCtl {
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> joined;
  std::atomic<uint32_t> left;  // destroyed its communicator
  alignas(64) std::atomic<uint64_t> arrived;  // last barrier generation reached
  alignas(64) std::atomic<uint32_t> doorbell; // futex word: bumped by anyone who may unblock this rank
  std::atomic<uint32_t> sleeping;
  alignas(64) OpDesc desc[2];
};

struct alignas(64) ChanCtl {  // channel src -> dst for send/recv (two halves)
  std::atomic<uint64_t> sent;
  alignas(64) std::atomic<uint64_t> consumed;
  std::atomic<uint32_t> err;   // the receiver found a size mismatch
  struct Hdr { uint64_t msg, total, off, len; } hdr[2];
};

struct alignas(64) Header {
  uint64_t magic;
  std::atomic<uint32_t> ready;
  uint32_t nranks;
  uint64_t slot_bytes, chan_bytes, total_bytes;
  std::atomic<uint32_t> attached;
  std::atomic<int32_t> broken_rank;   // first rank that failed or aborted (-1: none)
  std::atomic<uint32_t> broken_ready;
  int32_t broken_code;
  char broken_msg[512];
};

struct Layout {
  uint64_t ranks, chans, slots, chandata, total;
  Layout(uint32_t n, uint64_t slot, uint64_t chan) {
    ranks = (sizeof(Header) + 63) / 64 * 64;
    chans = ranks + n * sizeof(RankCtl);
    slots = (chans + uint64_t(n) * n * sizeof(ChanCtl) + 4095) / 4096 * 4096;
    chandata = slots + n * slot;
    total = chandata + uint64_t(n) * n * chan;
  }
};

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const struct timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

bool pid_exited(int32_t pid) {
  if (pid <= 0 || pid == getpid()) return false;
  if (kill(pid, 0) == -1 && errno == ESRCH) return true;
  // A dead child not yet reaped by its parent is a zombie: kill() still finds it.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return errno == ENOENT;
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* rp = std::strrchr(buf, ')');
  return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

// ------------------------------------------------------------------ element types and reductions

size_t elsize(int dt) {
  switch (dt) {
    case simcclInt8: case simcclUint8: case simcclBool: return 1;
    case simcclFloat16: case simcclBfloat16: case simcclInt16: return 2;
    case simcclInt32: case simcclUint32: case simcclFloat32: return 4;
    case simcclInt64: case simcclUint64: case simcclFloat64: case simcclComplex64: return 8;
    case simcclComplex128: return 16;
  }
  return 0;
}
const char* dtype_name(int dt) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
                                "float32", "float64", "bfloat16", "bool", "int16", "complex64", "complex128"};
  return dt >= 0 && dt < 14 ? names[dt] : "?";
}
const char* op_name(int op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < 5 ? names[op] : "?";
}

inline float h2f(uint16_t h) {
  uint32_t s = uint32_t(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, f;
  if (e == 0) {
    if (m == 0) {
      f = s;
    } else {
      e = 127 - 15 + 1;
      while (!(m & 0x400)) { m <<= 1; --e; }
      f = s | (e << 23) | ((m & 0x3ff) << 13);
    }
  } else if (e == 31) {
    f = s | 0x7f800000u | (m << 13);
  } else {
    f = s | ((e + 112) << 23) | (m << 13);
  }
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}
inline uint16_t f2h(float x) {  // round to nearest even (F. Giesen's float_to_half_fast3_rtne)
  const uint32_t f32infty = 255u << 23, f16max = (127u + 16) << 23, denorm_magic = ((127u - 15) + (23 - 10) + 1) << 23;
  uint32_t f;
  std::memcpy(&f, &x, 4);
  uint32_t sign = f & 0x80000000u;
  f ^= sign;
  uint16_t o;
  if (f >= f16max) {
    o = f > f32infty ? 0x7e00 : 0x7c00;
  } else if (f < (113u << 23)) {
    float fv, dm;
    std::memcpy(&fv, &f, 4);
    std::memcpy(&dm, &denorm_magic, 4);
    fv += dm;
    uint32_t r;
    std::memcpy(&r, &fv, 4);
    o = static_cast<uint16_t>(r - denorm_magic);
  } else {
    uint32_t mant_odd = (f >> 13) & 1;
    f += (uint32_t(15 - 127) << 23) + 0xfff;
    f += mant_odd;
    o = static_cast<uint16_t>(f >> 13);
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}
inline float bf2f(uint16_t b) {
  uint32_t f = uint32_t(b) << 16;
  float out;
  std::memcpy(&out, &f, 4);
  return out;
}
inline uint16_t f2bf(float x) {
  uint32_t f;
  std::memcpy(&f, &x, 4);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x40);
  return static_cast<uint16_t>((f + 0x7fffu + ((f >> 16) & 1)) >> 16);
}

// dst[i] = fin(src0[i] op src1[i] op ... op src{n-1}[i]), folded in rank order (identical on all
// ranks), accumulating in A, in blocks that stay in L1.
template <class T, class A, class Load, class Store, class Op, class Fin>
void reduce_blocks(void* dst, const void* const* srcs, int n, size_t len, Load ld, Store st, Op op, Fin fin) {
  constexpr size_t B = 512;
  A acc[B];
  T* d = static_cast<T*>(dst);
  for (size_t i0 = 0; i0 < len; i0 += B) {
    const size_t m = std::min(B, len - i0);
    const T* s0 = static_cast<const T*>(srcs[0]) + i0;
    for (size_t j = 0; j < m; ++j) acc[j] = ld(s0[j]);
    for (int k = 1; k < n; ++k) {
      const T* sk = static_cast<const T*>(srcs[k]) + i0;
      for (size_t j = 0; j < m; ++j) acc[j] = op(acc[j], ld(sk[j]));
    }
    for (size_t j = 0; j < m; ++j) d[i0 + j] = st(fin(acc[j]));
  }
}

template <class T> struct is_complex : std::false_type {};
template <class T> struct is_complex<std::complex<T>> : std::true_type {};

// max/min of complex numbers are refused at call time.
template <class T, class A, class Load, class Store>
void reduce_arith(void* dst, const void* const* srcs, int n, size_t len, int op, Load ld, Store st) {
  auto id = [](A a) { return a; };
  switch (op) {
    case simcclSum: reduce_blocks<T, A>(dst, srcs, n, len, ld, st, [](A a, A b) { return A(a + b); }, id); break;
    case simcclProd: reduce_blocks<T, A>(dst, srcs, n, len, ld, st, [](A a, A b) { return A(a * b); }, id); break;
    case simcclMax:
      if constexpr (!is_complex<A>::value)
        reduce_blocks<T, A>(dst, srcs, n, len, ld, st, [](A a, A b) { return b > a ? b : a; }, id);
      break;
    case simcclMin:
      if constexpr (!is_complex<A>::value)
        reduce_blocks<T, A>(dst, srcs, n, len, ld, st, [](A a, A b) { return b < a ? b : a; }, id);
      break;
    case simcclAvg: {
      A div = A(n);
      reduce_blocks<T, A>(dst, srcs, n, len, ld, st, [](A a, A b) { return A(a + b); }, [div](A a) { return A(a / div); });
      break;
    }
  }
}

// Integers: sum and product wrap (computed unsigned); avg = the wrapped sum / nranks (truncated).
template <class T>
void reduce_int(void* dst, const void* const* srcs, int n, size_t len, int op) {
  using U = std::make_unsigned_t<T>;
  auto ld = [](T v) { return v; };
  auto st = [](T v) { return v; };
  auto id = [](T a) { return a; };
  switch (op) {
    case simcclSum: reduce_blocks<T, T>(dst, srcs, n, len, ld, st, [](T a, T b) { return T(U(a) + U(b)); }, id); break;
    case simcclProd: reduce_blocks<T, T>(dst, srcs, n, len, ld, st, [](T a, T b) { return T(U(a) * U(b)); }, id); break;
    case simcclMax: reduce_blocks<T, T>(dst, srcs, n, len, ld, st, [](T a, T b) { return b > a ? b : a; }, id); break;
    case simcclMin: reduce_blocks<T, T>(dst, srcs, n, len, ld, st, [](T a, T b) { return b < a ? b : a; }, id); break;
    case simcclAvg: {
      T div = T(n);
      reduce_blocks<T, T>(dst, srcs, n, len, ld, st, [](T a, T b) { return T(U(a) + U(b)); }, [div](T a) { return T(a / div); });
      break;
    }
  }
}

void reduce(void* dst, const void* const* srcs, int n, size_t len, int dtype, int op) {
  if (n == 1) {
    if (dst != srcs[0]) std::memmove(dst, srcs[0], len * elsize(dtype));
    return;
  }
  auto same = [](auto v) { return v; };
  switch (dtype) {
    case simcclInt8: reduce_int<int8_t>(dst, srcs, n, len, op); break;
    case simcclUint8: reduce_int<uint8_t>(dst, srcs, n, len, op); break;
    case simcclInt16: reduce_int<int16_t>(dst, srcs, n, len, op); break;
    case simcclInt32: reduce_int<int32_t>(dst, srcs, n, len, op); break;
    case simcclUint32: reduce_int<uint32_t>(dst, srcs, n, len, op); break;
    case simcclInt64: reduce_int<int64_t>(dst, srcs, n, len, op); break;
    case simcclUint64: reduce_int<uint64_t>(dst, srcs, n, len, op); break;
    case simcclFloat32: reduce_arith<float, float>(dst, srcs, n, len, op, same, same); break;
    case simcclFloat64: reduce_arith<double, double>(dst, srcs, n, len, op, same, same); break;
    case simcclFloat16: reduce_arith<uint16_t, float>(dst, srcs, n, len, op, h2f, f2h); break;
    case simcclBfloat16: reduce_arith<uint16_t, float>(dst, srcs, n, len, op, bf2f, f2bf); break;
    case simcclComplex64:
      reduce_arith<std::complex<float>, std::complex<float>>(dst, srcs, n, len, op, same, same);
      break;
    case simcclComplex128:
      reduce_arith<std::complex<double>, std::complex<double>>(dst, srcs, n, len, op, same, same);
      break;
    case simcclBool: {  // sum/max = or, prod/min = and
      auto ld = [](uint8_t v) { return uint8_t(v != 0); };
      auto id = [](uint8_t a) { return a; };
      if (op == simcclSum || op == simcclMax)
        reduce_blocks<uint8_t, uint8_t>(dst, srcs, n, len, ld, id, [](uint8_t a, uint8_t b) { return uint8_t(a | b); }, id);
      else
        reduce_blocks<uint8_t, uint8_t>(dst, srcs, n, len, ld, id, [](uint8_t a, uint8_t b) { return uint8_t(a & b); }, id);
      break;
    }
  }
}

// ------------------------------------------------------------------ communicators

struct Op {
  uint32_t kind;
  const char* send;
  char* recv;
  size_t count;
  int dtype, op, root;  // root: the peer for send/recv
  uint64_t seq;         // collectives: number on this comm (from 0)
};

struct Comm {
  int rank = 0, nranks = 0, device = 0;
  std::string shm_name;
  void* base = nullptr;
  size_t map_bytes = 0;
  Header* hdr = nullptr;
  RankCtl* ranks = nullptr;
  ChanCtl* chans = nullptr;
  char* slots = nullptr;
  char* chandata = nullptr;
  uint64_t slot_bytes = 0, chan_bytes = 0;
  long long timeout_ms = 30000;
  long long split_bytes = 64 << 10;
  FaultCfg faults;

  std::mutex m;
  std::condition_variable cv;
  uint64_t next_ticket = 0, run_ticket = 0, next_seq = 0;
  size_t pending = 0;
  std::string last_error;
  std::atomic<bool> aborted{false};
  std::atomic<int> async_error{simcclSuccess};

  // touched only by the unit that runs (units run one at a time, in ticket order)
  uint64_t gen = 0;    // barriers passed
  uint64_t chunks = 0; // chunks moved through the slots (picks the half)
  std::vector<uint64_t> send_msgs, recv_msgs;

  ~Comm() {
    if (base) munmap(base, map_bytes);
  }

  RankCtl& me() { return ranks[rank]; }
  char* slot(int r, uint64_t k) { return slots + uint64_t(r) * slot_bytes + (k % 2) * (slot_bytes / 2); }
  ChanCtl& chan(int src, int dst) { return chans[src * nranks + dst]; }
  char* chan_data(int src, int dst) { return chandata + uint64_t(src * nranks + dst) * chan_bytes; }

  void ring(int r) {
    RankCtl& rc = ranks[r];
    rc.doorbell.fetch_add(1);
    if (rc.sleeping.load()) futex(&rc.doorbell, FUTEX_WAKE, INT_MAX, nullptr);
  }
  void ring_all() {
    for (int r = 0; r < nranks; ++r) ring(r);
  }
  std::string who(int r) { return "rank " + std::to_string(r) + " (pid " + std::to_string(ranks[r].pid.load()) + ")"; }

  void set_broken(simcclResult_t code, const std::string& msg) {
    int32_t expected = -1;
    if (hdr->broken_rank.compare_exchange_strong(expected, rank)) {
      hdr->broken_code = code;
      std::snprintf(hdr->broken_msg, sizeof hdr->broken_msg, "%s", msg.c_str());
      hdr->broken_ready.store(1);
    }
    ring_all();
  }

  // Waits until done(nullptr) is true. done(&v) lists the ranks still waited for. Fails when
  // this comm is aborted, a peer broke the communicator, a waited-for rank exited or destroyed
  // its communicator, or SIMCCL_TIMEOUT_MS passes.
  template <class Done>
  simcclResult_t wait(Done done, const std::string& what, std::string* err) {
    for (int i = 0; i < 200; ++i) {
      if (done(nullptr)) return simcclSuccess;
      cpu_relax();
    }
    const auto start = Clock::now();
    while (Clock::now() - start < std::chrono::microseconds(200)) {
      if (done(nullptr)) return simcclSuccess;
      sched_yield();
    }
    const auto deadline = start + std::chrono::milliseconds(timeout_ms);
    auto next_check = start;
    RankCtl& self = me();
    for (;;) {
      uint32_t bell = self.doorbell.load();
      self.sleeping.store(1);
      if (done(nullptr)) {
        self.sleeping.store(0);
        return simcclSuccess;
      }
      simcclResult_t rc = simcclSuccess;
      auto now = Clock::now();
      if (aborted.load()) {
        rc = simcclInvalidUsage;
        *err = what + ": the communicator was aborted";
      } else if (hdr->broken_ready.load() && hdr->broken_rank.load() != rank) {
        rc = simcclRemoteError;
        *err = what + ": " + hdr->broken_msg;
      } else if (now >= next_check || now >= deadline) {
        std::vector<int> missing;
        done(&missing);
        for (int r : missing) {
          if (ranks[r].left.load()) {
            rc = simcclRemoteError;
            *err = what + ": " + who(r) + " destroyed its communicator during " + what;
            break;
          }
          if (pid_exited(ranks[r].pid.load())) {
            rc = simcclRemoteError;
            *err = who(r) + " exited during " + what;
            break;
          }
        }
        if (rc == simcclSuccess && now >= deadline) {
          std::string list;
          for (int r : missing) list += (list.empty() ? "" : ", ") + who(r);
          rc = simcclTimeout;
          *err = what + ": " + (list.empty() ? std::string("a peer") : list) + " did not arrive within " +
                 std::to_string(timeout_ms) + " ms (SIMCCL_TIMEOUT_MS)";
        }
        next_check = now + std::chrono::milliseconds(20);
      }
      if (rc != simcclSuccess) {
        self.sleeping.store(0);
        return rc;
      }
      auto left = std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(20));
      if (left < Clock::duration::zero()) left = Clock::duration::zero();
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      struct timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      futex(&self.doorbell, FUTEX_WAIT, bell, &ts);
      self.sleeping.store(0);
    }
  }

  simcclResult_t barrier(const std::string& what, std::string* err) {
    const uint64_t g = ++gen;
    me().arrived.store(g);
    for (int p = 0; p < nranks; ++p)
      if (p != rank) ring(p);
    return wait(
        [&](std::vector<int>* missing) {
          bool ok = true;
          for (int p = 0; p < nranks; ++p)
            if (ranks[p].arrived.load(std::memory_order_acquire) < g) {
              ok = false;
              if (!missing) break;
              missing->push_back(p);
            }
          return ok;
        },
        what, err);
  }
};

struct HandleRegistry {
  std::mutex m;
  std::unordered_set<simcclComm*> live;
};
HandleRegistry& registry() {
  static HandleRegistry* r = new HandleRegistry();  // never destroyed: queued work may outlive exit
  return *r;
}

}  // namespace

struct simcclComm {
  std::shared_ptr<Comm> c;
};

namespace {

std::shared_ptr<Comm> lookup(simcclComm_t comm) {
  HandleRegistry& r = registry();
  std::lock_guard<std::mutex> g(r.m);
  if (!comm || !r.live.count(comm)) return nullptr;
  return comm->c;
}

std::string describe(const OpDesc& d) {
  std::string s = std::string(kind_name(d.kind)) + "(count=" + std::to_string(d.count) + ", " + dtype_name(d.dtype);
  if (d.kind == kAllReduce || d.kind == kReduce || d.kind == kReduceScatter) s += std::string(", ") + op_name(d.op);
  if (d.kind == kBroadcast || d.kind == kReduce) s += ", root=" + std::to_string(d.root);
  return s + ")";
}

std::string op_label(const Op& o) {
  if (o.kind == kSend) return "send to rank " + std::to_string(o.root);
  if (o.kind == kRecv) return "recv from rank " + std::to_string(o.root);
  return std::string(kind_name(o.kind)) + " #" + std::to_string(o.seq + 1);
}

// After a collective's first barrier (generation g): every rank published what it called.
simcclResult_t check_descs(Comm& c, uint64_t g, const std::string& what, std::string* err) {
  const OpDesc& d0 = c.me().desc[g % 2];
  for (int p = 0; p < c.nranks; ++p) {
    const OpDesc& d = c.ranks[p].desc[g % 2];
    if (d.seq != d0.seq || d.kind != d0.kind || d.dtype != d0.dtype || d.count != d0.count ||
        (d.op != d0.op && (d.kind == kAllReduce || d.kind == kReduce || d.kind == kReduceScatter)) ||
        (d.root != d0.root && (d.kind == kBroadcast || d.kind == kReduce))) {
      *err = what + ": ranks disagree: rank " + std::to_string(c.rank) + " called " + describe(d0) + ", rank " +
             std::to_string(p) + " called " + describe(d) + " as its collective #" + std::to_string(d.seq + 1);
      return simcclInvalidUsage;
    }
  }
  return simcclSuccess;
}

simcclResult_t run_collective(Comm& c, const Op& o, std::string* err) {
  const std::string what = op_label(o);
  if (c.hdr->broken_ready.load() && c.hdr->broken_rank.load() != c.rank) {
    *err = what + ": " + c.hdr->broken_msg;
    return simcclRemoteError;
  }
  const size_t es = elsize(o.dtype);
  const int n = c.nranks, r = c.rank;
  const int parts = (o.kind == kReduceScatter || o.kind == kAllToAll) ? n : 1;
  const size_t chunk = std::max<size_t>(1, (c.slot_bytes / 2) / (es * parts));
  const size_t total = o.count;
  const size_t nchunks = total == 0 ? 1 : (total + chunk - 1) / chunk;
  std::vector<const void*> srcs(n);
  // all_reduce chunks of at least SIMCCL_SPLIT_BYTES: each rank reduces 1/n of each chunk
  const bool split = o.kind == kAllReduce && n > 1 && std::min(chunk, total) * es >= uint64_t(c.split_bytes);
  for (size_t k = 0; k < nchunks; ++k) {
    const size_t off = k * chunk, len = std::min(chunk, total - off), bytes = len * es;
    const uint64_t g = c.gen + 1, h = c.chunks++;
    char* mine = c.slot(r, h);
    if (k == 0) c.me().desc[g % 2] = OpDesc{o.seq, o.kind, uint32_t(o.dtype), uint32_t(o.op), o.root, o.count};
    // part p of the chunk: elements [lo(p), lo(p+1))
    auto lo = [&](int p) { return len * size_t(p) / size_t(n); };
    if (split) {
      for (int p = 0; p < n; ++p)
        if (p != r) std::memcpy(mine + lo(p) * es, o.send + (off + lo(p)) * es, (lo(p + 1) - lo(p)) * es);
      if (simcclResult_t rc = c.barrier(what, err)) return rc;
      if (k == 0)
        if (simcclResult_t rc = check_descs(c, g, what, err)) return rc;
      const size_t a = lo(r), m = lo(r + 1) - a;
      for (int p = 0; p < n; ++p) srcs[p] = p == r ? o.send + (off + a) * es : c.slot(p, h) + a * es;
      if (m) {
        reduce(mine + a * es, srcs.data(), n, m, o.dtype, o.op);
        std::memcpy(o.recv + (off + a) * es, mine + a * es, m * es);
      }
      if (simcclResult_t rc = c.barrier(what, err)) return rc;
      for (int p = 0; p < n; ++p)
        if (p != r && lo(p + 1) > lo(p))
          std::memcpy(o.recv + (off + lo(p)) * es, c.slot(p, h) + lo(p) * es, (lo(p + 1) - lo(p)) * es);
      continue;
    }
    switch (o.kind) {
      case kAllReduce: case kReduce: case kAllGather:
        if (n > 1 && bytes) std::memcpy(mine, o.send + off * es, bytes);
        break;
      case kBroadcast:
        if (n > 1 && r == o.root && bytes) std::memcpy(mine, o.send + off * es, bytes);
        break;
      case kReduceScatter: case kAllToAll:
        for (int p = 0; p < n; ++p)
          if (bytes) std::memcpy(mine + p * bytes, o.send + (p * total + off) * es, bytes);
        break;
    }
    if (simcclResult_t rc = c.barrier(what, err)) return rc;
    if (k == 0)
      if (simcclResult_t rc = check_descs(c, g, what, err)) return rc;
    auto slot_of = [&](int p) -> const char* { return p == r && n == 1 ? o.send + off * es : c.slot(p, h); };
    switch (o.kind) {
      case kAllReduce: case kReduce:
        if (o.kind == kReduce && r != o.root) break;
        if (!bytes) break;
        for (int p = 0; p < n; ++p) srcs[p] = slot_of(p);
        reduce(o.recv + off * es, srcs.data(), n, len, o.dtype, o.op);
        break;
      case kBroadcast:
        if (!bytes) break;
        if (r != o.root) std::memcpy(o.recv + off * es, c.slot(o.root, h), bytes);
        else if (o.recv != o.send) std::memcpy(o.recv + off * es, o.send + off * es, bytes);
        break;
      case kAllGather:
        if (!bytes) break;
        for (int p = 0; p < n; ++p) {
          char* dst = o.recv + (p * total + off) * es;
          if (p == r) {
            if (dst != o.send + off * es) std::memmove(dst, o.send + off * es, bytes);
          } else {
            std::memcpy(dst, c.slot(p, h), bytes);
          }
        }
        break;
      case kReduceScatter:
        if (!bytes) break;
        for (int p = 0; p < n; ++p) srcs[p] = c.slot(p, h) + r * bytes;
        reduce(o.recv + off * es, srcs.data(), n, len, o.dtype, o.op);
        break;
      case kAllToAll:
        if (!bytes) break;
        for (int p = 0; p < n; ++p) std::memcpy(o.recv + (p * total + off) * es, c.slot(p, h) + r * bytes, bytes);
        break;
    }
  }
  return simcclSuccess;
}

// Send/recv: every p2p op of a unit progresses together (a group's send and recv between two
// ranks cannot deadlock on the bounded channels). Ops on the same channel go in call order.
struct P2P {
  const Op* op;
  size_t bytes, done = 0;
  uint64_t msg = 0, chunks = 0;
  bool finished = false;
};

simcclResult_t run_p2p(Comm& c, std::vector<const Op*>& ops, std::string* err) {
  if (c.hdr->broken_ready.load() && c.hdr->broken_rank.load() != c.rank) {
    *err = op_label(*ops[0]) + ": " + c.hdr->broken_msg;
    return simcclRemoteError;
  }
  std::vector<P2P> st;
  for (const Op* o : ops) {
    P2P p{o, o->count * elsize(o->dtype)};
    p.msg = o->kind == kSend ? c.send_msgs[o->root]++ : c.recv_msgs[o->root]++;
    st.push_back(p);
  }
  const size_t half = c.chan_bytes / 2;
  auto first_on_channel = [&](size_t i) {
    for (size_t j = 0; j < i; ++j)
      if (!st[j].finished && st[j].op->kind == st[i].op->kind && st[j].op->root == st[i].op->root) return false;
    return true;
  };
  for (;;) {
    bool all_done = true;
    for (size_t i = 0; i < st.size(); ++i) {
      P2P& p = st[i];
      if (p.finished) continue;
      all_done = false;
      if (!first_on_channel(i)) continue;
      const int peer = p.op->root;
      if (p.op->kind == kSend) {
        ChanCtl& ch = c.chan(c.rank, peer);
        char* data = c.chan_data(c.rank, peer);
        if (ch.err.load()) {
          *err = op_label(*p.op) + ": rank " + std::to_string(peer) + " expected a message of another size than " +
                 std::to_string(p.bytes) + " bytes";
          return simcclInvalidUsage;
        }
        while (!p.finished) {
          uint64_t s = ch.sent.load(std::memory_order_relaxed), cons = ch.consumed.load(std::memory_order_acquire);
          if (s - cons >= 2) break;
          const uint64_t h = s % 2, len = std::min<uint64_t>(half, p.bytes - p.done);
          ch.hdr[h] = ChanCtl::Hdr{p.msg, p.bytes, p.done, len};
          if (len) std::memcpy(data + h * half, p.op->send + p.done, len);
          ch.sent.store(s + 1, std::memory_order_release);
          c.ring(peer);
          p.done += len;
          ++p.chunks;
          p.finished = p.done == p.bytes;
        }
      } else {
        ChanCtl& ch = c.chan(peer, c.rank);
        char* data = c.chan_data(peer, c.rank);
        while (!p.finished) {
          uint64_t s = ch.sent.load(std::memory_order_acquire), cons = ch.consumed.load(std::memory_order_relaxed);
          if (s == cons) break;
          const uint64_t h = cons % 2;
          const ChanCtl::Hdr hd = ch.hdr[h];
          if (hd.msg != p.msg || hd.total != p.bytes || hd.off != p.done) {
            ch.err.store(1);
            c.ring(peer);
            *err = op_label(*p.op) + ": expected " + std::to_string(p.bytes) + " bytes, rank " + std::to_string(peer) +
                   " sent " + std::to_string(hd.total) + " bytes";
            return simcclInvalidUsage;
          }
          if (hd.len) std::memcpy(p.op->recv + p.done, data + h * half, hd.len);
          ch.consumed.store(cons + 1, std::memory_order_release);
          c.ring(peer);
          p.done += hd.len;
          ++p.chunks;
          p.finished = p.done == p.bytes;
        }
      }
    }
    if (all_done) return simcclSuccess;
    if (std::all_of(st.begin(), st.end(), [](const P2P& p) { return p.finished; })) return simcclSuccess;
    std::string what;
    for (auto& p : st)
      if (!p.finished) what += (what.empty() ? "" : ", ") + op_label(*p.op);
    simcclResult_t rc = c.wait(
        [&](std::vector<int>* missing) {
          bool ready = false;
          for (size_t i = 0; i < st.size(); ++i) {
            P2P& p = st[i];
            if (p.finished || !first_on_channel(i)) continue;
            const int peer = p.op->root;
            bool can;
            if (p.op->kind == kSend) {
              ChanCtl& ch = c.chan(c.rank, peer);
              can = ch.err.load() || ch.sent.load() - ch.consumed.load() < 2;
            } else {
              ChanCtl& ch = c.chan(peer, c.rank);
              can = ch.sent.load() != ch.consumed.load();
            }
            if (can) ready = true;
            else if (missing) missing->push_back(peer);
          }
          return ready;
        },
        what, err);
    if (rc) return rc;
  }
}

struct Unit {
  std::shared_ptr<Comm> c;
  uint64_t ticket;
  std::vector<Op> ops;
};

void fault_point(Comm& c, const Op& o) {
  const FaultCfg& f = c.faults;
  if (f.die_after < 0 && f.stall_after < 0) return;
  if (f.rank >= 0 && f.rank != c.rank) return;
  long long k = g_fault_ops.fetch_add(1);
  if (k == f.die_after) {
    std::fprintf(stderr, "simccl: rank %d (pid %d) exits at %s (fault injected: SIMCCL_FAULTS die_after=%lld)\n",
                 c.rank, int(getpid()), op_label(o).c_str(), f.die_after);
    std::fflush(stderr);
    _exit(1);
  }
  if (k == f.stall_after) std::this_thread::sleep_for(std::chrono::milliseconds(f.stall_ms));
}

void run_unit(void* arg) {
  std::unique_ptr<Unit> u(static_cast<Unit*>(arg));
  Comm& c = *u->c;
  simcclResult_t rc = simcclSuccess;
  std::string err;
  const std::string first = op_label(u->ops[0]);
  {
    std::unique_lock<std::mutex> g(c.m);
    bool ok = c.cv.wait_for(g, std::chrono::milliseconds(c.timeout_ms), [&] {
      return c.run_ticket == u->ticket || c.aborted.load() || c.async_error.load() != simcclSuccess;
    });
    if (c.aborted.load()) {
      rc = simcclInvalidUsage;
      err = first + ": the communicator was aborted";
    } else if (c.async_error.load() != simcclSuccess) {
      rc = static_cast<simcclResult_t>(c.async_error.load());
      err = first + ": the communicator failed earlier: " + c.last_error;
    } else if (!ok) {
      rc = simcclTimeout;
      err = first + ": an earlier operation of this communicator (queued on another stream) did not run within " +
            std::to_string(c.timeout_ms) + " ms (SIMCCL_TIMEOUT_MS)";
    }
  }
  if (rc == simcclSuccess) {
    std::vector<const Op*> p2p;
    for (const Op& o : u->ops) {
      fault_point(c, o);
      if (o.kind == kSend || o.kind == kRecv) {
        p2p.push_back(&o);
        continue;
      }
      if ((rc = run_collective(c, o, &err))) break;
    }
    if (rc == simcclSuccess && !p2p.empty()) rc = run_p2p(c, p2p, &err);
  }
  if (rc != simcclSuccess) {
    std::string msg = "simccl rank " + std::to_string(c.rank) + " of " + std::to_string(c.nranks) + " (pid " +
                      std::to_string(getpid()) + "): " + err + " [" + simcclGetErrorString(rc) + "]";
    {
      std::lock_guard<std::mutex> g(c.m);
      if (c.async_error.load() == simcclSuccess) {
        c.async_error.store(rc);
        c.last_error = msg;
      }
    }
    if (rc != simcclRemoteError || !c.hdr->broken_ready.load()) c.set_broken(rc, "rank " + std::to_string(c.rank) +
        " (pid " + std::to_string(getpid()) + ") failed: " + err);
    simnpuStreamSetError(nullptr, simnpuErrorLaunchFailure, msg.c_str());
  }
  std::lock_guard<std::mutex> g(c.m);
  c.run_ticket = std::max(c.run_ticket, u->ticket + 1);
  --c.pending;
  c.cv.notify_all();
}

// ------------------------------------------------------------------ submission and groups

struct Pending {
  std::shared_ptr<Comm> c;
  simnpuStream_t stream;
  Op op;
};
thread_local int tls_group_depth = 0;
thread_local std::vector<Pending> tls_group;

simcclResult_t submit(const std::shared_ptr<Comm>& cp, simnpuStream_t stream, std::vector<Op> ops) {
  Comm& c = *cp;
  auto* u = new Unit{cp, 0, std::move(ops)};
  std::lock_guard<std::mutex> g(c.m);
  u->ticket = c.next_ticket;
  uint64_t seq = c.next_seq;
  for (Op& o : u->ops)
    if (o.kind != kSend && o.kind != kRecv) o.seq = seq++;
  int cur = 0;
  bool switched = false;
  if (!stream && simnpuGetDevice(&cur) == simnpuSuccess && cur != c.device) {
    simnpuSetDevice(c.device);  // NULL: the communicator's device's default stream
    switched = true;
  }
  simnpuError_t e = simnpuLaunchHostFunc(stream, run_unit, u);
  if (switched) simnpuSetDevice(cur);
  if (e != simnpuSuccess) {
    std::string m = std::string("simnpuLaunchHostFunc failed: ") + simnpuGetErrorString(e) + ": " + simnpuGetLastErrorMessage();
    delete u;
    c.last_error = m;
    return fail(simcclUnhandledError, m);
  }
  c.next_ticket++;
  c.next_seq = seq;
  c.pending++;
  return simcclSuccess;
}

simcclResult_t check_buffer(Comm& c, const void* p, size_t bytes, const char* what) {
  if (bytes == 0) return simcclSuccess;
  // The runtime tells the device of any pointer into an allocation: both ends must be on one.
  int dev = -1, end_dev = -1;
  if (!p || simnpuPointerGetDevice(p, &dev) != simnpuSuccess ||
      simnpuPointerGetDevice(static_cast<const char*>(p) + bytes - 1, &end_dev) != simnpuSuccess || end_dev != dev)
    return fail(simcclInvalidArgument, std::string(what) + " is not simnpu device memory of " + std::to_string(bytes) + " bytes");
  if (dev != c.device)
    return fail(simcclInvalidArgument, std::string(what) + " is on device " + std::to_string(dev) +
                                           ", the communicator on device " + std::to_string(c.device));
  return simcclSuccess;
}

simcclResult_t enqueue(simcclComm_t comm, simnpuStream_t stream, Op o, size_t send_elems, size_t recv_elems,
                       bool check_send, bool check_recv) {
  std::shared_ptr<Comm> cp = lookup(comm);
  if (!cp) return fail(simcclInvalidArgument, std::string(kind_name(o.kind)) + ": invalid communicator");
  Comm& c = *cp;
  const std::string name = kind_name(o.kind);
  simcclResult_t rc = [&]() -> simcclResult_t {
    if (o.dtype < 0 || o.dtype > 13) return fail(simcclInvalidArgument, name + ": unknown datatype " + std::to_string(o.dtype));
    if (o.op < 0 || o.op > 4) return fail(simcclInvalidArgument, name + ": unknown reduce op " + std::to_string(o.op));
    bool reducing = o.kind == kAllReduce || o.kind == kReduce || o.kind == kReduceScatter;
    if (reducing && (o.dtype == simcclComplex64 || o.dtype == simcclComplex128) && (o.op == simcclMax || o.op == simcclMin))
      return fail(simcclInvalidArgument, name + ": " + op_name(o.op) + " is not defined for " + dtype_name(o.dtype));
    if (reducing && o.dtype == simcclBool && o.op == simcclAvg)
      return fail(simcclInvalidArgument, name + ": avg is not defined for bool");
    if ((o.kind == kBroadcast || o.kind == kReduce || o.kind == kSend || o.kind == kRecv) && (o.root < 0 || o.root >= c.nranks))
      return fail(simcclInvalidArgument, name + ": " + (o.kind == kSend || o.kind == kRecv ? "peer " : "root ") +
                                             std::to_string(o.root) + " is not a rank of " + std::to_string(c.nranks));
    const size_t es = elsize(o.dtype);
    const size_t big = std::max(send_elems, recv_elems);
    if (o.count && (big / o.count < 1 || big > SIZE_MAX / es))
      return fail(simcclInvalidArgument, name + ": count " + std::to_string(o.count) + " overflows");
    if (check_send)
      if (simcclResult_t r = check_buffer(c, o.send, send_elems * es, (name + ": sendbuff").c_str())) return r;
    if (check_recv)
      if (simcclResult_t r = check_buffer(c, o.recv, recv_elems * es, (name + ": recvbuff").c_str())) return r;
    if (stream) {
      int dev = -1;
      if (simnpuStreamGetDevice(stream, &dev) != simnpuSuccess)
        return fail(simcclInvalidArgument, name + ": invalid simnpu stream");
      if (dev != c.device)
        return fail(simcclInvalidArgument, name + ": stream is on device " + std::to_string(dev) +
                                               ", the communicator on device " + std::to_string(c.device));
    }
    return simcclSuccess;
  }();
  if (rc) {
    std::lock_guard<std::mutex> g(c.m);
    c.last_error = tls_error;
    return rc;
  }
  if (tls_group_depth > 0) {
    tls_group.push_back(Pending{cp, stream, o});
    return simcclSuccess;
  }
  return submit(cp, stream, {o});
}

}  // namespace

// ------------------------------------------------------------------ C API

extern "C" {

simcclResult_t simcclGetVersion(int* version) {
  if (!version) return fail(simcclInvalidArgument, "simcclGetVersion: version is NULL");
  *version = SIMCCL_VERSION_CODE;
  return simcclSuccess;
}

const char* simcclGetErrorString(simcclResult_t result) {
  switch (result) {
    case simcclSuccess: return "no error";
    case simcclUnhandledError: return "unhandled simnpu runtime error";
    case simcclSystemError: return "unhandled system error";
    case simcclInternalError: return "internal error";
    case simcclInvalidArgument: return "invalid argument";
    case simcclInvalidUsage: return "invalid usage";
    case simcclRemoteError: return "remote process exited or there was a network error";
    case simcclInProgress: return "operation in progress";
    case simcclTimeout: return "timeout";
  }
  return "unknown result code";
}

const char* simcclGetLastError(simcclComm_t comm) {
  if (comm) {
    std::shared_ptr<Comm> c = lookup(comm);
    if (c) {
      std::lock_guard<std::mutex> g(c->m);
      tls_return = c->last_error;
      return tls_return.c_str();
    }
  }
  tls_return = tls_error;
  return tls_return.c_str();
}

simcclResult_t simcclGetUniqueId(simcclUniqueId* id) {
  if (!id) return fail(simcclInvalidArgument, "simcclGetUniqueId: id is NULL");
  unsigned char rnd[16];
  size_t got = 0;
  while (got < sizeof rnd) {
    ssize_t n = getrandom(rnd + got, sizeof rnd - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(simcclSystemError, std::string("simcclGetUniqueId: getrandom: ") + std::strerror(errno));
    }
    got += size_t(n);
  }
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, kIdMagic, 8);
  std::string name = "/simccl-" + std::to_string(getpid()) + "-";
  static const char* hex = "0123456789abcdef";
  for (unsigned char b : rnd) {
    name += hex[b >> 4];
    name += hex[b & 15];
  }
  std::memcpy(id->internal + 8, name.c_str(), name.size() + 1);
  return simcclSuccess;
}

simcclResult_t simcclCommInitRank(simcclComm_t* comm, int nranks, simcclUniqueId id, int rank) {
  if (!comm) return fail(simcclInvalidArgument, "simcclCommInitRank: comm is NULL");
  *comm = nullptr;
  if (nranks < 1 || nranks > 1024)
    return fail(simcclInvalidArgument, "simcclCommInitRank: nranks " + std::to_string(nranks) + " is not from 1 to 1024");
  if (rank < 0 || rank >= nranks)
    return fail(simcclInvalidArgument, "simcclCommInitRank: rank " + std::to_string(rank) + " is not from 0 to " +
                                           std::to_string(nranks - 1));
  if (std::memcmp(id.internal, kIdMagic, 8) != 0 || !std::memchr(id.internal + 8, 0, SIMCCL_UNIQUE_ID_BYTES - 8) ||
      id.internal[8] != '/')
    return fail(simcclInvalidArgument, "simcclCommInitRank: not a unique id from simcclGetUniqueId");
  Config cfg;
  if (simcclResult_t rc = read_config(&cfg)) return fail(rc, "simcclCommInitRank: " + tls_error);
  int device = 0;
  if (simnpuError_t e = simnpuGetDevice(&device))
    return fail(simcclUnhandledError, std::string("simcclCommInitRank: simnpuGetDevice: ") + simnpuGetErrorString(e));

  auto c = std::make_shared<Comm>();
  c->rank = rank;
  c->nranks = nranks;
  c->device = device;
  c->shm_name = std::string(id.internal + 8);
  c->timeout_ms = cfg.timeout_ms;
  c->split_bytes = cfg.split_bytes;
  c->faults = cfg.faults;
  const std::string where = "simcclCommInitRank(rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ")";
  const auto deadline = Clock::now() + std::chrono::milliseconds(cfg.timeout_ms);
  const char* name = c->shm_name.c_str();

  // Create the segment, or attach to the one another rank created.
  for (;;) {
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
      uint64_t chan = std::max<uint64_t>(64 << 10, (uint64_t(cfg.slot_bytes) / nranks + 4095) / 4096 * 4096);
      Layout L(nranks, cfg.slot_bytes, chan);
      // Reserve the pages now: a full /dev/shm is an error here, not a SIGBUS in a collective.
      if (int e = ftruncate(fd, off_t(L.total)) != 0 ? errno : posix_fallocate(fd, 0, off_t(L.total))) {
        close(fd);
        shm_unlink(name);
        return fail(simcclSystemError, where + ": cannot reserve " + std::to_string(L.total) + " bytes of shared memory " +
                                           name + ": " + std::strerror(e) + " (see df /dev/shm; SIMCCL_SLOT_BYTES)");
      }
      void* base = mmap(nullptr, L.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (base == MAP_FAILED) {
        shm_unlink(name);
        return fail(simcclSystemError, where + ": mmap of shared memory " + name + ": " + std::strerror(errno));
      }
      auto* h = new (base) Header();
      h->magic = kMagic;
      h->nranks = uint32_t(nranks);
      h->slot_bytes = uint64_t(cfg.slot_bytes);
      h->chan_bytes = chan;
      h->total_bytes = L.total;
      h->attached.store(0);
      h->broken_rank.store(-1);
      h->broken_ready.store(0);
      for (int r = 0; r < nranks; ++r) new (static_cast<char*>(base) + L.ranks + r * sizeof(RankCtl)) RankCtl();
      for (int r = 0; r < nranks * nranks; ++r) new (static_cast<char*>(base) + L.chans + r * sizeof(ChanCtl)) ChanCtl();
      h->ready.store(1);
      c->base = base;
      c->map_bytes = L.total;
      break;
    }
    if (errno != EEXIST)
      return fail(simcclSystemError, where + ": shm_open(" + name + "): " + std::strerror(errno));
    fd = shm_open(name, O_RDWR, 0600);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // unlinked meanwhile (a timed-out init): create it anew
      return fail(simcclSystemError, where + ": shm_open(" + name + "): " + std::strerror(errno));
    }
    // Wait for the creator to size and initialise it.
    void* base = nullptr;
    size_t total = 0;
    for (;;) {
      struct stat sb{};
      if (fstat(fd, &sb) == 0 && size_t(sb.st_size) >= sizeof(Header)) {
        void* hp = mmap(nullptr, sizeof(Header), PROT_READ, MAP_SHARED, fd, 0);
        if (hp != MAP_FAILED) {
          auto* h = static_cast<Header*>(hp);
          bool ready = h->ready.load() == 1;
          total = h->total_bytes;
          uint32_t their = h->nranks;
          munmap(hp, sizeof(Header));
          if (ready) {
            if (their != uint32_t(nranks)) {
              close(fd);
              return fail(simcclInvalidUsage, where + ": the communicator was created with nranks=" + std::to_string(their));
            }
            base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (base == MAP_FAILED) {
              int e = errno;
              close(fd);
              return fail(simcclSystemError, where + ": mmap of shared memory " + name + ": " + std::strerror(e));
            }
            break;
          }
        }
      }
      if (Clock::now() >= deadline) {
        close(fd);
        return fail(simcclTimeout, where + ": shared memory " + name + " was not initialised within " +
                                       std::to_string(cfg.timeout_ms) + " ms (SIMCCL_TIMEOUT_MS)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    close(fd);
    c->base = base;
    c->map_bytes = total;
    break;
  }
  auto* b = static_cast<char*>(c->base);
  c->hdr = reinterpret_cast<Header*>(b);
  c->slot_bytes = c->hdr->slot_bytes;
  c->chan_bytes = c->hdr->chan_bytes;
  Layout L(nranks, c->slot_bytes, c->chan_bytes);
  c->ranks = reinterpret_cast<RankCtl*>(b + L.ranks);
  c->chans = reinterpret_cast<ChanCtl*>(b + L.chans);
  c->slots = b + L.slots;
  c->chandata = b + L.chandata;
  c->send_msgs.assign(nranks, 0);
  c->recv_msgs.assign(nranks, 0);

  uint32_t expected = 0;
  if (!c->me().joined.compare_exchange_strong(expected, 1))
    return fail(simcclInvalidUsage, where + ": rank " + std::to_string(rank) + " already joined (pid " +
                                        std::to_string(c->me().pid.load()) + ")");
  c->me().pid.store(getpid());
  if (c->hdr->attached.fetch_add(1) + 1 == uint32_t(nranks)) shm_unlink(name);  // everyone has it mapped
  c->ring_all();
  std::string err;
  simcclResult_t rc = c->wait(
      [&](std::vector<int>* missing) {
        if (c->hdr->attached.load() == uint32_t(nranks)) return true;
        if (missing)
          for (int r = 0; r < nranks; ++r)
            if (!c->ranks[r].joined.load()) missing->push_back(r);
        return false;
      },
      where, &err);
  if (rc != simcclSuccess) {
    c->me().left.store(1);
    shm_unlink(name);
    if (rc == simcclTimeout) {
      std::string list;
      for (int r = 0; r < nranks; ++r)
        if (!c->ranks[r].joined.load()) list += (list.empty() ? "" : ", ") + std::to_string(r);
      err = where + ": rank(s) " + list + " did not join within " + std::to_string(cfg.timeout_ms) +
            " ms (SIMCCL_TIMEOUT_MS)";
    }
    return fail(rc, err);
  }
  auto* handle = new simcclComm{c};
  {
    HandleRegistry& r = registry();
    std::lock_guard<std::mutex> g(r.m);
    r.live.insert(handle);
  }
  *comm = handle;
  return simcclSuccess;
}

static std::shared_ptr<Comm> unregister(simcclComm_t comm) {
  HandleRegistry& r = registry();
  std::lock_guard<std::mutex> g(r.m);
  if (!comm || !r.live.erase(comm)) return nullptr;
  std::shared_ptr<Comm> c = std::move(comm->c);
  delete comm;
  return c;
}

simcclResult_t simcclCommDestroy(simcclComm_t comm) {
  std::shared_ptr<Comm> c = unregister(comm);
  if (!c) return fail(simcclInvalidArgument, "simcclCommDestroy: invalid communicator");
  {
    std::unique_lock<std::mutex> g(c->m);
    c->cv.wait(g, [&] { return c->pending == 0; });
  }
  c->me().left.store(1);
  c->ring_all();
  shm_unlink(c->shm_name.c_str());
  return simcclSuccess;  // the mapping goes with the last reference
}

simcclResult_t simcclCommAbort(simcclComm_t comm) {
  std::shared_ptr<Comm> c = unregister(comm);
  if (!c) return fail(simcclInvalidArgument, "simcclCommAbort: invalid communicator");
  c->aborted.store(true);
  c->set_broken(simcclRemoteError, c->who(c->rank) + " aborted the communicator");
  c->me().left.store(1);
  shm_unlink(c->shm_name.c_str());
  {
    std::lock_guard<std::mutex> g(c->m);
    c->cv.notify_all();
  }
  return simcclSuccess;
}

simcclResult_t simcclCommGetAsyncError(simcclComm_t comm, simcclResult_t* async_error) {
  std::shared_ptr<Comm> c = lookup(comm);
  if (!c || !async_error) return fail(simcclInvalidArgument, "simcclCommGetAsyncError: invalid argument");
  *async_error = static_cast<simcclResult_t>(c->async_error.load());
  return simcclSuccess;
}

simcclResult_t simcclCommCount(simcclComm_t comm, int* count) {
  std::shared_ptr<Comm> c = lookup(comm);
  if (!c || !count) return fail(simcclInvalidArgument, "simcclCommCount: invalid argument");
  *count = c->nranks;
  return simcclSuccess;
}

simcclResult_t simcclCommUserRank(simcclComm_t comm, int* rank) {
  std::shared_ptr<Comm> c = lookup(comm);
  if (!c || !rank) return fail(simcclInvalidArgument, "simcclCommUserRank: invalid argument");
  *rank = c->rank;
  return simcclSuccess;
}

simcclResult_t simcclCommDevice(simcclComm_t comm, int* device) {
  std::shared_ptr<Comm> c = lookup(comm);
  if (!c || !device) return fail(simcclInvalidArgument, "simcclCommDevice: invalid argument");
  *device = c->device;
  return simcclSuccess;
}

static Op make_op(uint32_t kind, const void* s, void* r, size_t count, simcclDataType_t dt, int op, int root) {
  return Op{kind, static_cast<const char*>(s), static_cast<char*>(r), count, int(dt), op, root, 0};
}

simcclResult_t simcclAllReduce(const void* sendbuff, void* recvbuff, size_t count, simcclDataType_t datatype,
                               simcclRedOp_t op, simcclComm_t comm, simnpuStream_t stream) {
  return enqueue(comm, stream, make_op(kAllReduce, sendbuff, recvbuff, count, datatype, op, 0), count, count, true, true);
}

simcclResult_t simcclBroadcast(const void* sendbuff, void* recvbuff, size_t count, simcclDataType_t datatype, int root,
                               simcclComm_t comm, simnpuStream_t stream) {
  int rank = -1;
  if (std::shared_ptr<Comm> c = lookup(comm)) rank = c->rank;
  return enqueue(comm, stream, make_op(kBroadcast, sendbuff, recvbuff, count, datatype, 0, root), count, count,
                 rank == root, true);
}

simcclResult_t simcclReduce(const void* sendbuff, void* recvbuff, size_t count, simcclDataType_t datatype,
                            simcclRedOp_t op, int root, simcclComm_t comm, simnpuStream_t stream) {
  int rank = -1;
  if (std::shared_ptr<Comm> c = lookup(comm)) rank = c->rank;
  return enqueue(comm, stream, make_op(kReduce, sendbuff, recvbuff, count, datatype, op, root), count, count, true,
                 rank == root);
}

simcclResult_t simcclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, simcclDataType_t datatype,
                               simcclComm_t comm, simnpuStream_t stream) {
  std::shared_ptr<Comm> c = lookup(comm);
  size_t n = c ? size_t(c->nranks) : 1;
  if (n > 1 && sendcount > SIZE_MAX / n) return fail(simcclInvalidArgument, "all_gather: sendcount overflows");
  return enqueue(comm, stream, make_op(kAllGather, sendbuff, recvbuff, sendcount, datatype, 0, 0), sendcount,
                 sendcount * n, true, true);
}

simcclResult_t simcclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, simcclDataType_t datatype,
                                   simcclRedOp_t op, simcclComm_t comm, simnpuStream_t stream) {
  std::shared_ptr<Comm> c = lookup(comm);
  size_t n = c ? size_t(c->nranks) : 1;
  if (n > 1 && recvcount > SIZE_MAX / n) return fail(simcclInvalidArgument, "reduce_scatter: recvcount overflows");
  return enqueue(comm, stream, make_op(kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0), recvcount * n,
                 recvcount, true, true);
}

simcclResult_t simcclAllToAll(const void* sendbuff, void* recvbuff, size_t count, simcclDataType_t datatype,
                              simcclComm_t comm, simnpuStream_t stream) {
  std::shared_ptr<Comm> c = lookup(comm);
  size_t n = c ? size_t(c->nranks) : 1;
  if (n > 1 && count > SIZE_MAX / n) return fail(simcclInvalidArgument, "all_to_all: count overflows");
  if (c && count && sendbuff != recvbuff) {
    const char* s = static_cast<const char*>(sendbuff);
    const char* r = static_cast<const char*>(recvbuff);
    size_t bytes = count * n * elsize(datatype);
    if (elsize(datatype) && s < r + bytes && r < s + bytes)
      return fail(simcclInvalidArgument, "all_to_all: sendbuff and recvbuff overlap without being the same buffer");
  }
  return enqueue(comm, stream, make_op(kAllToAll, sendbuff, recvbuff, count, datatype, 0, 0), count * n, count * n,
                 true, true);
}

simcclResult_t simcclSend(const void* sendbuff, size_t count, simcclDataType_t datatype, int peer, simcclComm_t comm,
                          simnpuStream_t stream) {
  return enqueue(comm, stream, make_op(kSend, sendbuff, nullptr, count, datatype, 0, peer), count, 0, true, false);
}

simcclResult_t simcclRecv(void* recvbuff, size_t count, simcclDataType_t datatype, int peer, simcclComm_t comm,
                          simnpuStream_t stream) {
  return enqueue(comm, stream, make_op(kRecv, nullptr, recvbuff, count, datatype, 0, peer), 0, count, false, true);
}

simcclResult_t simcclGroupStart(void) {
  ++tls_group_depth;
  return simcclSuccess;
}

simcclResult_t simcclGroupEnd(void) {
  if (tls_group_depth == 0) return fail(simcclInvalidUsage, "simcclGroupEnd without simcclGroupStart");
  if (--tls_group_depth > 0) return simcclSuccess;
  std::vector<Pending> items = std::move(tls_group);
  tls_group.clear();
  // One unit per (comm, stream), in the order of their first call.
  std::vector<std::pair<std::pair<Comm*, simnpuStream_t>, std::vector<Op>>> buckets;
  std::map<std::pair<Comm*, simnpuStream_t>, size_t> index;
  std::map<Comm*, std::shared_ptr<Comm>> owners;
  for (Pending& p : items) {
    auto key = std::make_pair(p.c.get(), p.stream);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, buckets.size()).first;
      buckets.push_back({key, {}});
    }
    buckets[it->second].second.push_back(p.op);
    owners[p.c.get()] = p.c;
  }
  simcclResult_t first = simcclSuccess;
  for (auto& b : buckets) {
    simcclResult_t rc = submit(owners[b.first.first], b.first.second, std::move(b.second));
    if (rc && !first) first = rc;
  }
  return first;
}

}  // extern "C"
