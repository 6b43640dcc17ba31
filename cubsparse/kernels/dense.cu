// The dense path: where a cost model predicts dense cuBLAS faster than the sparse kernels
// (small blocks at high density), W's blocks are written into a dense matrix whose other
// elements stay zero (scatter_blocks, or fill_dense, then the dense product), and the
// weight gradient is a dense product whose blocks are read out (gather_blocks). The
// scatter and gather move nnzb * b * b elements, a small fraction of the product's cost
// wherever that path is taken; fill_dense writes the whole matrix, for blocks whose rows
// are too short for the scatter's writes to fill whole memory sectors.
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
  grid_dependency();
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
  grid_dependency();
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

// dense[r][c] = W's element (r, c), zero where W has no block: one thread per 16-byte
// vector of the dense matrix (grid-stride over its `nvec` vectors), each looking up its
// block's index in `map` (the layout's block rows x `nbc` block columns, -1 where absent).
// Every write is whole and consecutive threads write consecutive vectors of one row, so
// the writes fill whole sectors; a block row of 16 bytes (b = 8 in 16 bits) scattered
// alone fills half of one, which halves the scatter's write rate. Writing the zeros too
// costs rows x cols elements instead of nnzb * b * b: it pays from a density of about a
// quarter at b = 8 in 16 bits (dsd_rules.FILL_MIN_DENSITY).
template <class T, int B>
__global__ void __launch_bounds__(256)
    fill_dense(const T* __restrict__ data, const int* __restrict__ map, int nbc,
               T* __restrict__ dense, i64 ld, i64 nvec) {
  grid_dependency();
  constexpr int VEC = 16 / sizeof(T);
  const i64 row_vecs = ld / VEC;
  for (i64 v = (i64)blockIdx.x * 256 + threadIdx.x; v < nvec; v += (i64)gridDim.x * 256) {
    const i64 r = v / row_vecs, c = (v % row_vecs) * VEC;
    const int p = map[(r / B) * nbc + c / B];
    int4 val = make_int4(0, 0, 0, 0);
    if (p >= 0) val = *(const int4*)(data + ((i64)p * B + r % B) * B + c % B);
    ((int4*)dense)[v] = val;
  }
}
