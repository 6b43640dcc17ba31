// Hopper (sm_90a) helpers shared by the wgmma kernels: shared-memory matrix descriptors,
// the wgmma fences and groups, and the async-proxy fence that publishes cp.async data to
// the tensor cores.
#pragma once

// Matrix descriptor for a K-major operand in the 128-byte swizzle: start address, stride
// between 8-row groups (1024 bytes), swizzle mode 1 in bits 62-63; the leading offset is
// unused in this mode (1 by convention).
__device__ __forceinline__ unsigned long long wgmma_desc_sw128(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Stops the compiler from moving accumulator reads or writes across an asynchronous MMA.
template <int R>
__device__ __forceinline__ void keep_in_registers(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Matrix descriptor for an MN-major operand (M-major A or N-major B, wgmma's transposed
// modes) stored as rows of k, each ROW bytes (128, 64 or 32) of the M/N axis in the
// matching swizzle. Two strides: between 8-row groups along k (8 * ROW, SBO) and between
// ROW-byte atoms along M/N (`panel`, LBO), where an operand wider than one atom is kept.
template <int ROW>
__device__ __forceinline__ unsigned long long wgmma_desc_mn(unsigned addr, unsigned panel) {
  constexpr unsigned long long mode = ROW == 128 ? 1 : ROW == 64 ? 2 : 3;
  static_assert(ROW == 128 || ROW == 64 || ROW == 32, "swizzle spans 32, 64 or 128 bytes");
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(panel >> 4) << 16) |
         ((unsigned long long)((8 * ROW) >> 4) << 32) | (mode << 62);
}
