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
#define BERTRT_WGMMA_ACC32 \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
#define BERTRT_WGMMA_OUT32                                                                        \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15])
#define BERTRT_WGMMA_ACC64                                                                      \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
#define BERTRT_WGMMA_OUT64                                                                        \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define BERTRT_WGMMA_ACC128                                                                     \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63}, "
#define BERTRT_WGMMA_OUT128                                                                       \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define BERTRT_WGMMA_ACC256                                                                        \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "    \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "     \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "     \
  "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, "     \
  "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, "     \
  "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, " \
  "%109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, "     \
  "%124, %125, %126, %127}, "
#define BERTRT_WGMMA_OUT256                                                                       \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),  \
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),  \
      "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),  \
      "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),  \
      "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),  \
      "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]),  \
      "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),          \
      "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),         \
      "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),         \
      "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]),         \
      "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
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
