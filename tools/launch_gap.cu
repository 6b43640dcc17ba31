// The GPU's own cost of a kernel launch, eager against CUDA-graph replay.
//
// An eager loop of short kernels runs slower than the same kernels replayed from a CUDA
// graph even where the host enqueues faster than the GPU drains them. This program
// measures that floor without cubsparse or Python in the way: a kernel that holds every
// CTA for T ns (on the global timer), launched K times behind a long kernel so that the
// queue is full before the timed launches start, then the same K launches captured in one
// graph, and the same launches with programmatic dependent launch (PDL), where the GPU
// takes in a launch while the previous kernel runs (and, with a trigger, may start its
// CTAs before the previous kernel's have exited). It also times the host's side of each
// launch form.
//
//   nvcc -O2 -arch=sm_90a -o launch_gap tools/launch_gap.cu && ./launch_gap
//
// Output: one line per (form, T, grid, parameter bytes): device µs per launch, its excess
// over T, and host µs per launch.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#define CHECK(...)                                                          \
  do {                                                                      \
    cudaError_t e_ = (__VA_ARGS__);                                         \
    if (e_ != cudaSuccess) {                                                \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #__VA_ARGS__,       \
                  cudaGetErrorString(e_));                                  \
      return 1;                                                             \
    }                                                                       \
  } while (0)

template <int W>
struct Pad {  // parameter bytes beside the three small ones (a TMA map is 128)
  unsigned long long v[W];
};

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// PDL = 0: an ordinary kernel. 1: waits for the previous grid, then lets the next one
// launch at once. 2: waits, and lets the next one launch when its own work is done.
template <int PDL, int W>
__global__ void spin(long long ns, int* sink, int tag, Pad<W> pad) {
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (PDL == 1) asm volatile("griddepcontrol.launch_dependents;");
  if (threadIdx.x == 0) {
    const unsigned long long end = now_ns() + ns;
    while (now_ns() < end) {
    }
    if (tag == -1) sink[blockIdx.x] = (int)pad.v[blockIdx.x % W];  // never true
  }
  __syncthreads();
  if (PDL == 2) asm volatile("griddepcontrol.launch_dependents;");
}

template <int PDL, int W>
cudaError_t launch(cudaStream_t s, int grid, long long ns, int* sink, const Pad<W>& pad,
                   bool attr) {
  if (!attr) {
    spin<PDL, W><<<grid, 128, 0, s>>>(ns, sink, 0, pad);
    return cudaGetLastError();
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(128);
  cfg.stream = s;
  cudaLaunchAttribute a[1];
  a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = a;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, spin<PDL, W>, ns, sink, 0, pad);
}

struct Result {
  double dev_us, host_us;
};

template <int PDL, int W>
int measure(cudaStream_t s, int grid, long long ns, int* sink, const Pad<W>& pad, bool attr,
            bool graph, int k, Result* out) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  cudaGraphExec_t exec = nullptr;
  if (graph) {
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < k; ++i) CHECK(launch<PDL, W>(s, grid, ns, sink, pad, attr));
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    CHECK(cudaGraphDestroy(g));
  }
  std::vector<double> dev, host;
  for (int rep = 0; rep < 7; ++rep) {
    // A long kernel first, so that every timed launch is queued before the GPU reaches it.
    spin<0, W><<<1, 32, 0, s>>>(3000000, sink, 0, pad);
    CHECK(cudaEventRecord(e0, s));
    auto t0 = std::chrono::steady_clock::now();
    if (graph) {
      CHECK(cudaGraphLaunch(exec, s));
    } else {
      for (int i = 0; i < k; ++i) CHECK(launch<PDL, W>(s, grid, ns, sink, pad, attr));
    }
    auto t1 = std::chrono::steady_clock::now();
    CHECK(cudaEventRecord(e1, s));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    dev.push_back(ms * 1e3 / k);
    host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / k);
  }
  std::sort(dev.begin(), dev.end());
  std::sort(host.begin(), host.end());
  out->dev_us = dev[dev.size() / 2];
  out->host_us = host[host.size() / 2];
  if (exec) CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return 0;
}

template <int W>
int sweep(cudaStream_t s, int sms, int* sink) {
  Pad<W> pad = {};
  const int k = 200;
  for (long long ns : {0LL, 2000LL, 5000LL, 8000LL}) {
    for (int grid : {sms, 4 * sms}) {
      struct Form {
        const char* name;
        int pdl;
        bool attr, graph;
      } forms[] = {{"eager", 0, false, false},
                   {"graph", 0, false, true},
                   {"eager pdl (start)", 1, true, false},
                   {"eager pdl (end)", 2, true, false},
                   {"graph pdl (end)", 2, true, true}};
      for (const Form& f : forms) {
        Result r;
        int rc = f.pdl == 0   ? measure<0, W>(s, grid, ns, sink, pad, f.attr, f.graph, k, &r)
                 : f.pdl == 1 ? measure<1, W>(s, grid, ns, sink, pad, f.attr, f.graph, k, &r)
                              : measure<2, W>(s, grid, ns, sink, pad, f.attr, f.graph, k, &r);
        if (rc) return rc;
        std::printf("%-22s %6.1f %5d %7d %9.2f %9.2f %9.2f\n", f.name, ns / 1e3, grid,
                    (int)(sizeof(Pad<W>) + 24), r.dev_us, r.dev_us - ns / 1e3, r.host_us);
      }
    }
  }
  return 0;
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int* sink;
  CHECK(cudaMalloc(&sink, 1 << 20));
  std::printf("%-22s %6s %5s %7s %9s %9s %9s\n", "form", "T_us", "grid", "params",
              "dev_us", "excess_us", "host_us");
  if (int rc = sweep<1>(s, prop.multiProcessorCount, sink)) return rc;
  if (int rc = sweep<64>(s, prop.multiProcessorCount, sink)) return rc;
  CHECK(cudaFree(sink));
  return 0;
}
