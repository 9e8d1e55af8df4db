/*
 * config.h -- every tunable of the runtime in one place, each with the reason
 * for its value. Kernels include this instead of hard-coding numbers.
 */
#pragma once

/* Alignment of every storage allocation: one cache line, and enough for an
 * aligned AVX-512 load. */
#define TT_CONFIG_ALIGNMENT 64

/* Storages at least this big ask the kernel for transparent huge pages
 * (madvise MADV_HUGEPAGE): a fresh 40 MB buffer otherwise takes ~10k page
 * faults on first touch. */
#define TT_CONFIG_HUGEPAGE_MIN_BYTES (2 * 1024 * 1024)

/* GEMM blocking (BLIS naming): the packed B panel KC x NC lives in L3/L2, the
 * packed A block MC x KC in L2, one KC x NR sliver of B in L1. The micro-kernel
 * register tile (MR x NR) is per ISA and lives beside each micro-kernel. */
#ifndef TT_GEMM_MC
#define TT_GEMM_MC 144
#endif
#ifndef TT_GEMM_KC
#define TT_GEMM_KC 256
#endif
/* NC = 1024: the packed B block (KC x NC floats = 1 MiB) stays within a 1-2 MiB L2 instead
 * of spilling to L3 (4080 did): N = 2048 went from 0.91x to 0.93x OpenBLAS on 1 thread and
 * 0.93x to 0.95x on 2 (AMD Zen 5 class, AVX-512), other sizes unchanged. */
#ifndef TT_GEMM_NC
#define TT_GEMM_NC 1024
#endif

/* A GEMM uses at most M*N*K / this many threads (and at least one): waking a thread
 * and the packing barriers cost ~20-30 us on the 2-core Zen 3 machine, so a thread needs
 * ~1M multiply-adds (~30 us of work) to pay for itself. Measured there (best of 9):
 * 64x784x10 (0.5M) took 91 us on two threads and 63 us on one, while 128^3 (2M) still
 * gained from two (81 vs 91 us). */
#define TT_GEMM_MIN_FLOPS_PER_THREAD (1LL << 20)

/* Attention uses at most work / this many threads (multiply-adds), and one below twice
 * this: the GEMM's reasoning (a worker's wake-up costs ~20-30 us, ~1M multiply-adds). */
#define TT_ATTENTION_MIN_WORK_PER_THREAD (1LL << 20)

/* Elementwise kernels split rows across threads only above this many elements. */
#define TT_ELEMENTWISE_PARALLEL_MIN (1LL << 16)

/* Elements per chunk of a parallel elementwise or row kernel (core/parallel.h): ~10-20 us
 * of work, so a worker that loses its core mid-chunk delays a call by little, while the
 * claim (one atomic compare-and-swap) stays negligible. */
#define TT_PARALLEL_CHUNK_ELEMENTS (1LL << 14)
