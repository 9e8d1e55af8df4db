/*
 * mps_gemm.mm -- tt_mps_available and tt_mps_sgemm (include/tinytorch/tinytorch.h, "MPS"):
 * float32 GEMM on an Apple GPU with Metal Performance Shaders. Built into libtinytorch only
 * on Apple platforms with TT_METAL=ON (CMakeLists.txt); elsewhere
 * runtime/core/mps_unavailable.cpp provides the same functions, which refuse.
 *
 * Owns: one Metal device and command queue, created on first use (std::call_once) and kept
 * for the life of the process. Each call wraps or copies the three matrices into
 * MTLBuffers in shared storage (CPU and GPU see the same memory on Apple silicon), encodes
 * one MPSMatrixMultiplication, commits and waits. An operand whose address is page-aligned
 * is wrapped with newBufferWithBytesNoCopy (the length rounded up to whole pages, which are
 * mapped because the operand's last byte lies in the last one); any other is copied once
 * with newBufferWithBytes, and C is then copied back from the buffer's contents. Which
 * operands were copied is reported through *copied and the kernel path.
 *
 * Never throws across the ABI: Objective-C exceptions are caught and turned into
 * TT_ERR_UNSUPPORTED; a command buffer that ends in error reports its NSError text.
 * Compiled with -fobjc-arc (ARC releases every object made here).
 */
#import <Foundation/Foundation.h>
#import <Metal/Metal.h>
#import <MetalPerformanceShaders/MetalPerformanceShaders.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>

#include "core/error.h"

namespace {

struct MpsContext {
    id<MTLDevice> device = nil;
    id<MTLCommandQueue> queue = nil;
    const char *why = nullptr;  /* set when no device could be used */
};

MpsContext &context() {
    static MpsContext ctx;
    static std::once_flag once;
    std::call_once(once, [] {
        @autoreleasepool {
            id<MTLDevice> device = MTLCreateSystemDefaultDevice();
            if (device == nil) {
                ctx.why = "no Metal device (MTLCreateSystemDefaultDevice returned nil)";
                return;
            }
            if (!MPSSupportsMTLDevice(device)) {
                ctx.why = "Metal Performance Shaders do not support this Metal device";
                return;
            }
            id<MTLCommandQueue> queue = [device newCommandQueue];
            if (queue == nil) {
                ctx.why = "could not create a Metal command queue";
                return;
            }
            ctx.device = device;
            ctx.queue = queue;
        }
    });
    return ctx;
}

/* A shared-storage buffer over `bytes` at `p`: wrapped in place when p is page-aligned,
 * else a copy of the bytes. *copied says which; nil only if Metal refuses both. */
id<MTLBuffer> buffer_for(id<MTLDevice> device, const void *p, size_t bytes, bool *copied) {
    const size_t page = (size_t)getpagesize();
    if ((uintptr_t)p % page == 0) {
        const size_t length = (bytes + page - 1) / page * page;
        id<MTLBuffer> wrapped = [device newBufferWithBytesNoCopy:const_cast<void *>(p)
                                                          length:length
                                                         options:MTLResourceStorageModeShared
                                                     deallocator:nil];
        if (wrapped != nil) {
            *copied = false;
            return wrapped;
        }
    }
    *copied = true;
    return [device newBufferWithBytes:p length:bytes options:MTLResourceStorageModeShared];
}

MPSMatrix *matrix_over(id<MTLBuffer> buffer, int64_t rows, int64_t cols) {
    MPSMatrixDescriptor *desc = [MPSMatrixDescriptor matrixDescriptorWithRows:(NSUInteger)rows
                                                                      columns:(NSUInteger)cols
                                                                     rowBytes:(NSUInteger)cols * sizeof(float)
                                                                     dataType:MPSDataTypeFloat32];
    return [[MPSMatrix alloc] initWithBuffer:buffer descriptor:desc];
}

}  // namespace

extern "C" {

TT_API int tt_mps_available(void) {
    MpsContext &ctx = context();
    if (ctx.device == nil) {
        tt::fail(TT_ERR_UNSUPPORTED, "tt_mps_available: %s", ctx.why);
        return 0;
    }
    return 1;
}

TT_API tt_status tt_mps_sgemm(int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C,
                              int *copied) {
    const char *fn = "tt_mps_sgemm";
    if (copied) *copied = 0;
    if (M < 0 || N < 0 || K < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: sizes must be >= 0, got M=%lld N=%lld K=%lld", fn,
                        (long long)M, (long long)N, (long long)K);
    int64_t bytes_a = 0, bytes_b = 0, bytes_c = 0;
    if (tt::mul_overflows(M, K, &bytes_a) || tt::mul_overflows(bytes_a, 4, &bytes_a) ||
        tt::mul_overflows(K, N, &bytes_b) || tt::mul_overflows(bytes_b, 4, &bytes_b) ||
        tt::mul_overflows(M, N, &bytes_c) || tt::mul_overflows(bytes_c, 4, &bytes_c))
        return tt::fail(TT_ERR_OVERFLOW, "%s: the bytes of a %lld x %lld x %lld product overflow int64", fn,
                        (long long)M, (long long)N, (long long)K);
    if (M == 0 || N == 0) {
        tt::set_kernel_path("mps_sgemm:empty");
        return TT_OK;
    }
    TT_CHECK_NOT_NULL(fn, C);
    if (K == 0) {
        std::memset(C, 0, (size_t)bytes_c);
        tt::set_kernel_path("mps_sgemm:empty");
        return TT_OK;
    }
    TT_CHECK_NOT_NULL(fn, A);
    TT_CHECK_NOT_NULL(fn, B);
    MpsContext &ctx = context();
    if (ctx.device == nil) return tt::fail(TT_ERR_UNSUPPORTED, "%s: %s", fn, ctx.why);
    @try {
        @autoreleasepool {
            bool copied_a = false, copied_b = false, copied_c = false;
            id<MTLBuffer> buf_a = buffer_for(ctx.device, A, (size_t)bytes_a, &copied_a);
            id<MTLBuffer> buf_b = buffer_for(ctx.device, B, (size_t)bytes_b, &copied_b);
            id<MTLBuffer> buf_c = nil;
            const size_t page = (size_t)getpagesize();
            if ((uintptr_t)C % page == 0)
                buf_c = [ctx.device newBufferWithBytesNoCopy:C
                                                      length:((size_t)bytes_c + page - 1) / page * page
                                                     options:MTLResourceStorageModeShared
                                                 deallocator:nil];
            if (buf_c == nil) {
                copied_c = true;
                buf_c = [ctx.device newBufferWithLength:(size_t)bytes_c options:MTLResourceStorageModeShared];
            }
            if (buf_a == nil || buf_b == nil || buf_c == nil)
                return tt::fail(TT_ERR_OUT_OF_MEMORY, "%s: Metal could not create a %lld-byte buffer", fn,
                                (long long)(buf_a == nil ? bytes_a : buf_b == nil ? bytes_b : bytes_c));
            MPSMatrixMultiplication *gemm =
                [[MPSMatrixMultiplication alloc] initWithDevice:ctx.device
                                                  transposeLeft:NO
                                                 transposeRight:NO
                                                     resultRows:(NSUInteger)M
                                                  resultColumns:(NSUInteger)N
                                                interiorColumns:(NSUInteger)K
                                                          alpha:1.0
                                                           beta:0.0];
            id<MTLCommandBuffer> commands = [ctx.queue commandBuffer];
            [gemm encodeToCommandBuffer:commands
                             leftMatrix:matrix_over(buf_a, M, K)
                            rightMatrix:matrix_over(buf_b, K, N)
                           resultMatrix:matrix_over(buf_c, M, N)];
            [commands commit];
            [commands waitUntilCompleted];
            if (commands.status != MTLCommandBufferStatusCompleted) {
                NSString *what = commands.error ? commands.error.localizedDescription : @"unknown error";
                return tt::fail(TT_ERR_UNSUPPORTED, "%s: the Metal command buffer failed: %s", fn, what.UTF8String);
            }
            if (copied_c) std::memcpy(C, buf_c.contents, (size_t)bytes_c);
            const int mask = (copied_a ? 1 : 0) | (copied_b ? 2 : 0) | (copied_c ? 4 : 0);
            if (copied) *copied = mask;
            tt::set_kernel_path(mask ? "mps_sgemm:copy" : "mps_sgemm:nocopy");
            return TT_OK;
        }
    } @catch (NSException *e) {
        return tt::fail(TT_ERR_UNSUPPORTED, "%s: Metal raised %s: %s", fn, e.name.UTF8String,
                        e.reason ? e.reason.UTF8String : "");
    }
}

}  // extern "C"
