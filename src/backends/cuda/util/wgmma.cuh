// The wgmma instructions (sm_90a) the CUDA kernels issue, fp32 accumulation,
// one overload per N and element type: Wgmma with A in registers (the
// attention kernels) and WgmmaSS with A in shared memory (the GEMMs of our
// own). Each takes N / 2 accumulator registers per thread, in the fragment
// layout attention_wgmma.cuh describes; their operand lists are spelled out
// once per N, below, and shared by both forms.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace bertrt::cuda {

// D[64 x N] (+)= A[64 x 16] B[16 x N]: A in registers (mma.sync's A fragment
// layout per warp), B through a descriptor, K-major (kTransB false) or
// N-major; accumulate == 0 ignores D's old contents.

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The accumulator operands: N / 2 floats d[0..N/2) as "+f" constraints, and
// their PTX list "{%0, ..., %(N/2 - 1)}, " (the other operands follow them),
// each built from groups so that every register is spelled once.
#define BERTRT_WGMMA_R0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define BERTRT_WGMMA_R1 \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define BERTRT_WGMMA_R2 \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define BERTRT_WGMMA_R3 \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define BERTRT_WGMMA_R4 \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define BERTRT_WGMMA_R5 \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define BERTRT_WGMMA_R6 \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
#define BERTRT_WGMMA_R7 \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define BERTRT_WGMMA_ACC32 "{" BERTRT_WGMMA_R0 "}, "
#define BERTRT_WGMMA_ACC64 "{" BERTRT_WGMMA_R0 ", " BERTRT_WGMMA_R1 "}, "
#define BERTRT_WGMMA_ACC128 \
  "{" BERTRT_WGMMA_R0 ", " BERTRT_WGMMA_R1 ", " BERTRT_WGMMA_R2 ", " BERTRT_WGMMA_R3 "}, "
#define BERTRT_WGMMA_ACC256                                                          \
  "{" BERTRT_WGMMA_R0 ", " BERTRT_WGMMA_R1 ", " BERTRT_WGMMA_R2 ", " BERTRT_WGMMA_R3 \
  ", " BERTRT_WGMMA_R4 ", " BERTRT_WGMMA_R5 ", " BERTRT_WGMMA_R6 ", " BERTRT_WGMMA_R7 "}, "
#define BERTRT_WGMMA_F8(i)                                                                    \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define BERTRT_WGMMA_F32(i) \
  BERTRT_WGMMA_F8(i), BERTRT_WGMMA_F8(i + 8), BERTRT_WGMMA_F8(i + 16), BERTRT_WGMMA_F8(i + 24)
#define BERTRT_WGMMA_OUT32 BERTRT_WGMMA_F8(0), BERTRT_WGMMA_F8(8)
#define BERTRT_WGMMA_OUT64 BERTRT_WGMMA_F32(0)
#define BERTRT_WGMMA_OUT128 BERTRT_WGMMA_F32(0), BERTRT_WGMMA_F32(32)
#define BERTRT_WGMMA_OUT256 BERTRT_WGMMA_OUT128, BERTRT_WGMMA_F32(64), BERTRT_WGMMA_F32(96)
// a: operands REGS..REGS+3, b: REGS+4, accumulate: REGS+5, kTransB: REGS+6.
#define BERTRT_WGMMA(N, REGS, A0, A1, A2, A3, B, ACCUMULATE, TRANS, CPP_TYPE, PTX_TYPE)     \
  template <bool kTransB>                                                                   \
  __device__ __forceinline__ void Wgmma(float(&d)[REGS], const uint32_t(&a)[4], uint64_t b, \
                                        int accumulate, CPP_TYPE) {                         \
    asm volatile("{\n.reg .pred acc;\nsetp.ne.b32 acc, %" #ACCUMULATE                       \
                 ", 0;\n"                                                                   \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_TYPE "." PTX_TYPE    \
                 " " BERTRT_WGMMA_ACC##N "{%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #B   \
                                         ", acc, 1, 1, %" #TRANS ";\n}\n"                   \
                 : BERTRT_WGMMA_OUT##N                                                      \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate),     \
                   "n"(kTransB ? 1 : 0));                                                   \
  }
BERTRT_WGMMA(32, 16, 16, 17, 18, 19, 20, 21, 22, __half, "f16")
BERTRT_WGMMA(32, 16, 16, 17, 18, 19, 20, 21, 22, __nv_bfloat16, "bf16")
BERTRT_WGMMA(64, 32, 32, 33, 34, 35, 36, 37, 38, __half, "f16")
BERTRT_WGMMA(64, 32, 32, 33, 34, 35, 36, 37, 38, __nv_bfloat16, "bf16")
BERTRT_WGMMA(128, 64, 64, 65, 66, 67, 68, 69, 70, __half, "f16")
BERTRT_WGMMA(128, 64, 64, 65, 66, 67, 68, 69, 70, __nv_bfloat16, "bf16")
#undef BERTRT_WGMMA

// D[64 x N] (+)= A[64 x 16] B[16 x N], both operands K-major in shared memory
// (SmemDescriptor, attention_wgmma.cuh); N = 64 (splitk_gemm.cu), 128
// (attention_tma.cuh; the stream-K probe, bench/probes/streamk_gemm.cuh) and
// 256 (the probe). a: operand REGS, b: REGS + 1, accumulate: REGS + 2.
#define BERTRT_WGMMA_SS(N, REGS, A, B, ACCUMULATE, CPP_TYPE, PTX_TYPE)                       \
  __device__ __forceinline__ void WgmmaSS(float(&d)[REGS], uint64_t a, uint64_t b, CPP_TYPE, \
                                          int accumulate = 1) {                              \
    asm volatile("{\n.reg .pred acc;\nsetp.ne.b32 acc, %" #ACCUMULATE                        \
                 ", 0;\n"                                                                    \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX_TYPE "." PTX_TYPE     \
                 " " BERTRT_WGMMA_ACC##N "%" #A ", %" #B ", acc, 1, 1, 0, 0;\n}\n"           \
                 : BERTRT_WGMMA_OUT##N                                                       \
                 : "l"(a), "l"(b), "r"(accumulate));                                         \
  }
BERTRT_WGMMA_SS(64, 32, 32, 33, 34, __half, "f16")
BERTRT_WGMMA_SS(64, 32, 32, 33, 34, __nv_bfloat16, "bf16")
BERTRT_WGMMA_SS(128, 64, 64, 65, 66, __half, "f16")
BERTRT_WGMMA_SS(128, 64, 64, 65, 66, __nv_bfloat16, "bf16")
BERTRT_WGMMA_SS(256, 128, 128, 129, 130, __half, "f16")
BERTRT_WGMMA_SS(256, 128, 128, 129, 130, __nv_bfloat16, "bf16")
#undef BERTRT_WGMMA_SS
#undef BERTRT_WGMMA_R0
#undef BERTRT_WGMMA_R1
#undef BERTRT_WGMMA_R2
#undef BERTRT_WGMMA_R3
#undef BERTRT_WGMMA_R4
#undef BERTRT_WGMMA_R5
#undef BERTRT_WGMMA_R6
#undef BERTRT_WGMMA_R7
#undef BERTRT_WGMMA_F8
#undef BERTRT_WGMMA_F32
#undef BERTRT_WGMMA_ACC32
#undef BERTRT_WGMMA_OUT32
#undef BERTRT_WGMMA_ACC64
#undef BERTRT_WGMMA_OUT64
#undef BERTRT_WGMMA_ACC128
#undef BERTRT_WGMMA_OUT128
#undef BERTRT_WGMMA_ACC256
#undef BERTRT_WGMMA_OUT256
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace bertrt::cuda
