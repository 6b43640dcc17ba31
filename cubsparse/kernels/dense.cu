// The dense path: where a cost model predicts dense cuBLAS faster than the sparse kernels
// (small blocks at high density), W's blocks are written into a dense matrix whose other
// elements stay zero (scatter_blocks, then the dense product), and the weight gradient is
// a dense product whose blocks are read out (gather_blocks). Both move nnzb * b * b
// elements, a small fraction of the product's cost wherever that path is taken.
#include "common.cuh"

struct F32 { typedef float storage; };
struct F64 { typedef double storage; };

__device__ __forceinline__ float load_acc(F16 t, const u16* p) { return to_f32(t, *p); }
__device__ __forceinline__ float load_acc(BF16 t, const u16* p) { return to_f32(t, *p); }
__device__ __forceinline__ float load_acc(F32, const float* p) { return *p; }
__device__ __forceinline__ double load_acc(F64, const double* p) { return *p; }
__device__ __forceinline__ void store_acc(F16 t, u16* p, float v) { *p = from_f32(t, v); }
__device__ __forceinline__ void store_acc(BF16 t, u16* p, float v) { *p = from_f32(t, v); }
__device__ __forceinline__ void store_acc(F32, float* p, float v) { *p = v; }
__device__ __forceinline__ void store_acc(F64, double* p, double v) { *p = v; }

// dense[rows[p] * B + i][cols[p] * B + j] = data[p][i][j], one thread per 16-byte vector
// of the blocks (a block row is at least 16 bytes; the dense rows are `ld` elements apart,
// a multiple of 16 bytes): the reads of `data` are contiguous whatever the block size, so
// small blocks move at the bandwidth of large ones. Grid-stride over the `nvec` vectors.
template <class T, int B>
__global__ void __launch_bounds__(256)
    scatter_blocks(const T* __restrict__ data, const int* __restrict__ rows,
                   const int* __restrict__ cols, T* __restrict__ dense, i64 ld, i64 nvec) {
  constexpr int VEC = 16 / sizeof(T), PER_ROW = B / VEC, PER_BLOCK = B * PER_ROW;
  for (i64 v = (i64)blockIdx.x * 256 + threadIdx.x; v < nvec; v += (i64)gridDim.x * 256) {
    const i64 p = v / PER_BLOCK;
    const int r = (int)(v % PER_BLOCK), i = r / PER_ROW, j = (r % PER_ROW) * VEC;
    *(int4*)(dense + ((i64)rows[p] * B + i) * ld + (i64)cols[p] * B + j) =
        ((const int4*)data)[v];
  }
}

// data[p] = alpha * dense[block p] + beta * data[p] (beta == 0: data is not read), in
// float (double for float64), one thread per 16-byte vector of the stored blocks, as in
// scatter_blocks: a block row is whole vectors, so every read of the product and every
// write of `data` is a 16-byte access. Grid-stride over the `nvec` vectors.
template <class Tag, int B>
__global__ void __launch_bounds__(256)
    gather_blocks(const typename Tag::storage* __restrict__ dense, i64 ld,
                  const int* __restrict__ rows, const int* __restrict__ cols,
                  typename Tag::storage* __restrict__ data, double alpha, double beta,
                  i64 nvec) {
  using T = typename Tag::storage;
  constexpr int VEC = 16 / sizeof(T), PER_ROW = B / VEC, PER_BLOCK = B * PER_ROW;
  const bool copy = alpha == 1.0 && beta == 0.0;
  for (i64 v = (i64)blockIdx.x * 256 + threadIdx.x; v < nvec; v += (i64)gridDim.x * 256) {
    const i64 p = v / PER_BLOCK;
    const int r = (int)(v % PER_BLOCK), i = r / PER_ROW, j = (r % PER_ROW) * VEC;
    int4 src = *(const int4*)(dense + ((i64)rows[p] * B + i) * ld + (i64)cols[p] * B + j);
    if (!copy) {
      int4 old = make_int4(0, 0, 0, 0);
      if (beta != 0.0) old = ((const int4*)data)[v];
      T* s = reinterpret_cast<T*>(&src);
      const T* o = reinterpret_cast<const T*>(&old);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        auto x = load_acc(Tag(), s + e) * (decltype(load_acc(Tag(), s)))alpha;
        if (beta != 0.0) x += (decltype(x))beta * load_acc(Tag(), o + e);
        store_acc(Tag(), s + e, x);
      }
    }
    ((int4*)data)[v] = src;
  }
}
