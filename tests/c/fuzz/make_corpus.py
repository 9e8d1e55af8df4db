#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses: corpus/<harness>/<name>.

Each seed is a handful of bytes laid out as the harness decodes them (see the decoding
code of each fuzz_*.c); they give the fuzzer a start in every mode -- every function,
the threaded size classes, batched layouts, invalid calls, the edge values -- which
random mutation would find only slowly. Run it after changing a decoder:

    python3 tests/c/fuzz/make_corpus.py
"""
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = bytes([0x5E, 0xED, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06])  # rng seed, 8 bytes


def f32(*values):
    return b"".join(struct.pack("<f", v) for v in values)


def f16(*bits):
    return b"".join(struct.pack("<H", b) for b in bits)


# fuzz_gemm.c: fn isa threads transA transB M N K batch size-class [class bytes]
#   ld-byte x3 [batched: stride-byte interleave-byte [2 bytes]] alpha beta null-bits mode
#   bad seed[8] [mutation bytes] config-byte [config bytes]
# fn: 0 sgemm, 1 sgemm_reference, 2 strided_batched, 3 hgemm, 4 hgemm_reference.
# alpha/beta index: 0:0 1:1 2:-1 3:0.5 4:2 5:-0.375 6:1.7 7:3.25 8:-2.5 9:1e-3 10:0.1.
# bad = 3 + 4 * (kind - 1): 15 lda too small, 35 NULL C, 39 huge ld, 51 overlapping C.
GEMM = {
    "sgemm_5x7x3": [0, 2, 0, 0, 0, 5, 7, 3, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0] + list(SEED),
    "sgemm_ref_trans_pad": [1, 0, 0, 1, 1, 9, 4, 6, 0, 0, 3, 2, 1, 6, 3, 0, 1, 0] + list(SEED),
    "sgemm_bigK": [0, 2, 1, 0, 1, 7, 5, 0, 0, 1, 0x58, 0x02, 0, 0, 0, 1, 5, 0, 2, 0] + list(SEED),
    "sgemm_bigM": [0, 1, 0, 1, 0, 0, 9, 17, 0, 2, 0x2c, 0x01, 1, 0, 2, 4, 1, 0, 0, 0] + list(SEED),
    "sgemm_threads": [0, 2, 1, 0, 0, 0, 0, 0, 0, 4, 60, 60, 120, 0, 0, 0, 1, 3, 0, 0, 0] + list(SEED),
    "sgemm_narrow_threads": [0, 1, 1, 0, 1, 0, 0, 0, 0, 5, 30, 2, 50, 0, 0, 0, 1, 1, 0, 0, 0] + list(SEED),
    "batched_stacked": [2, 1, 1, 0, 0, 6, 5, 4, 3, 0, 0, 0, 0, 0x40, 0, 1, 3, 0, 0, 0] + list(SEED),
    "batched_interleaved": [2, 2, 0, 0, 1, 3, 4, 5, 4, 0, 0, 0, 0, 0x05, 3, 1, 2, 4, 0, 0, 0, 0] + list(SEED),
    "batched_threads": [2, 2, 1, 0, 0, 0, 0, 0, 0, 3, 46, 16, 16, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0] + list(SEED),
    "batched_overlap": [2, 0, 0, 0, 0, 4, 3, 2, 3, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 51] + list(SEED) + [5],
    "hgemm_trans": [3, 2, 0, 1, 0, 8, 9, 10, 0, 0, 1, 0, 2, 3, 5, 0, 2, 0] + list(SEED),
    "hgemm_ref_K0_lda0": [4, 0, 0, 0, 0, 4, 5, 0, 0, 0, 0x10, 0, 0, 1, 3, 1, 0, 0] + list(SEED),
    "bad_lda": [0, 1, 0, 0, 0, 6, 6, 6, 0, 0, 0, 0, 0, 1, 1, 0, 0, 15] + list(SEED) + [1],
    "bad_null_c": [3, 0, 0, 0, 0, 2, 2, 2, 0, 0, 0, 0, 0, 1, 0, 0, 0, 35] + list(SEED),
    "bad_huge_ld": [1, 0, 0, 0, 1, 3, 3, 3, 0, 0, 0, 0, 0, 1, 0, 0, 0, 39] + list(SEED) + [2, 0],
    "config_api": [0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0] + list(SEED) + [7, 3, 7, 0, 0, 0],
}

# fuzz_gelu.c: fn isa threads seed[8] then
#   GELU (fn 0..3: forward, backward, forward_reference, backward_reference):
#     select (7: invalid call) rows cols flags mode [2 bytes if flags & 0xc0 == 0xc0] [raw values]
#     flags: 1 bias, 2 grad_bias, 4 in place (y over x / grad_x over grad_y), 8 grad_x over x;
#     mode 0: raw floats from the input
#   conversions (fn 4: f16 -> f32, 5: f32 -> f16): flags n [raw values]; flags & 0x0f == 0x0f: bad args
SPECIALS = f32(float("inf"), float("-inf"), float("nan"), 3.4028234663852886e38, -0.0, 1e-40,
               -10.5, 3.0, -0.7518, 1e30, -1e30, 88.0)
GELU = {
    "forward_bias": bytes([0, 1, 0]) + SEED + bytes([0, 3, 7, 1, 1]),
    "backward_bias_gb": bytes([1, 2, 1]) + SEED + bytes([0, 5, 9, 3, 2]),
    "backward_ref_inplace": bytes([3, 0, 0]) + SEED + bytes([0, 4, 33, 7, 1]),
    "backward_inplace_x": bytes([1, 1, 1]) + SEED + bytes([0, 6, 17, 9, 1]),
    "forward_ref_specials": bytes([2, 0, 0]) + SEED + bytes([0, 1, 12, 0, 0]) + SPECIALS,
    "backward_specials": bytes([1, 2, 0]) + SEED + bytes([0, 2, 6, 2, 0]) + SPECIALS + SPECIALS,
    "forward_threads": bytes([0, 2, 1]) + SEED + bytes([0, 0, 0, 0xc1, 1, 50, 20]),
    "backward_threads_gb": bytes([1, 1, 2]) + SEED + bytes([0, 0, 0, 0xc3, 2, 10, 5]),
    "bad_overlap": bytes([1, 0, 0]) + SEED + bytes([7, 1, 1, 0, 9, 1]),
    "bad_empty_huge": bytes([2, 0, 0]) + SEED + bytes([7, 0, 0, 11, 1, 0]),
    "f16_to_f32": bytes([4, 1, 0]) + SEED + bytes([0, 10])
    + f16(0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0x7c00, 0xfc00, 0x7e01, 0x8000, 0xfd00),
    "f32_to_f16": bytes([5, 2, 0]) + SEED + bytes([0, 12])
    + f32(65519.0, 65520.0, 2.0 ** -25, 1.5 * 2.0 ** -25, 2.0 ** -24, 1.00048828125,
          1.00146484375, float("nan"), float("-inf"), -0.0, 6.1035156e-5, 1e-10),
    "f32_to_f16_scalar_bad": bytes([5, 0, 0]) + SEED + bytes([0x0f, 1]),
}

# fuzz_tensor.c: a sequence of operations, opcode % 14:
#   0 storage_create  1 retain  2 release  3/4 tensor_create  5 from_storage  6 reshape
#   7 transpose  8 slice  9 free  10 query  11 stale handle  12 enums  13 memory counters
# tensor_create: dtype ndim-index dims...   (ndim index: 1 -> 1, 3 -> 2, 6 -> 3, 8 -> 4, 10 -> 8)
# from_storage: flags(1: NULL strides) dtype ndim-index dims... strides[8] offset storage-pick
TENSOR = {
    "views": bytes([0, 5, 96,                       # storage of 96 bytes
                    5, 1, 0, 3, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0,  # f32 [3, 4] at offset 8
                    7, 0, 0, 1,                     # transpose
                    8, 1, 0, 1, 3, 3,               # slice 1:3:2
                    10, 0, 0, 0,                    # queries
                    9, 0, 11, 5, 0, 0,              # free, use the freed handle
                    13]),
    "create_reshape": bytes([3, 1, 6, 2, 3, 4,      # f64 [2, 3, 4]
                             6, 0, 3, 1, 2,         # reshape to [3, 8]
                             8, 1, 1, 0, 2, 0,      # slice
                             10, 1, 1, 0,
                             2, 0, 11, 3, 0, 1, 12, 0xff, 0xff, 0xff, 0xff, 13]),
    "empty_dims": bytes([4, 0, 3, 0x80, 4,          # [0, 4]
                         8, 0, 1, 0, 4, 3,          # slice dim 1 0:4:2
                         6, 1, 1, 1, 0,             # reshape
                         7, 1, 0, 1, 10, 1, 2, 1]),
    "overflow_shapes": bytes([3, 0, 3, 0xa0, 0xa8,  # [2^20.., 2^28..]
                              3, 2, 6, 0x80, 0xbe, 0xc1,  # [0, 2^62, INT64_MAX]
                              0, 3, 5, 1, 3, 6, 1, 1, 1, 200, 220, 240, 0, 0, 0, 0, 0, 230, 0]),
    "stale_refs": bytes([0, 4, 0x00, 0x01,          # storage of 256 bytes
                         1, 0, 1, 0, 2, 0, 2, 0,     # retain, retain, release, release
                         3, 0, 1, 3,                # tensor [3]
                         2, 5,                      # release a lent storage (refused)
                         9, 1, 11, 1, 0, 5, 11, 3, 0, 2, 11, 0, 0, 12, 7, 0, 0, 0]),
}

# fuzz_attention.c: backward-bit isa threads seed[8] class (% 4 == 3: extreme arguments) then
#   extreme: 5 size indexes (batch heads sq sk d into 0 1 2 64 65 2^31 2^40 2^62 MAX-64 MAX -1 MIN)
#            scale index (1 0 -0.5 inf nan) causal+2
#   small:   batch heads size-flags (0x80: sq 63.., 0x40: sk 63..) sq sk d causal scale-index
#            mutation (7 + 8 (m - 1): 1 negative stride, 2 o over q, 3 o aliasing itself,
#            4 NULL q, 5 lse over o) layout q k v o (0: contiguous; bits 1,2,4 pad, 8 shared
#            head) [forward: lse bit] [backward: grad_o layout]
ATTENTION = {
    "fwd_small": bytes([0, 0, 0]) + SEED + bytes([0, 1, 2, 0, 5, 7, 4, 1, 1, 0, 0, 0, 0, 0, 1]),
    "fwd_padded_shared": bytes([0, 1, 1]) + SEED + bytes([1, 2, 3, 0, 9, 3, 8, 2, 0, 0, 0x13, 0x09, 0x0a, 0x07, 1]),
    "fwd_blocks": bytes([0, 2, 2]) + SEED + bytes([0, 1, 1, 0xc0, 3, 5, 8, 0, 0, 0, 0, 0, 0, 0, 1]),
    "fwd_causal_end": bytes([0, 1, 0]) + SEED + bytes([2, 1, 1, 0, 7, 3, 4, 2, 2, 0, 0, 0, 0, 0, 1]),
    "bwd_small": bytes([1, 0, 1]) + SEED + bytes([0, 1, 2, 0, 6, 4, 3, 1, 0, 0, 0, 0, 0, 0, 0]),
    "bwd_blocks_shared": bytes([1, 1, 2]) + SEED + bytes([2, 1, 2, 0xc0, 1, 2, 5, 1, 1, 0, 0x01, 0x08, 0x08, 0, 0x02]),
    "bad_negative_stride": bytes([0, 0, 0]) + SEED + bytes([0, 1, 1, 0, 3, 3, 2, 0, 0, 7, 0, 0, 0, 0, 1]),
    "bad_o_over_q": bytes([0, 0, 0]) + SEED + bytes([0, 1, 1, 0, 3, 3, 2, 0, 0, 15, 0, 0, 0, 0, 1]),
    "bad_o_self_alias": bytes([0, 0, 0]) + SEED + bytes([0, 1, 1, 0, 3, 3, 2, 0, 0, 23, 0, 0, 0, 0, 1]),
    "bad_null_q": bytes([0, 0, 0]) + SEED + bytes([0, 1, 1, 0, 3, 3, 2, 0, 0, 31, 0, 0, 0, 0, 1]),
    "bad_lse_over_o": bytes([0, 0, 0]) + SEED + bytes([0, 1, 1, 0, 3, 3, 2, 0, 0, 39, 0, 0, 0, 0, 1]),
    "extreme_d0_huge": bytes([0, 0, 0]) + SEED + bytes([3, 1, 1, 6, 6, 0, 0, 2]),
    "extreme_d0_huge_bwd": bytes([1, 0, 0]) + SEED + bytes([3, 1, 1, 6, 6, 0, 0, 3]),
    "extreme_rows_max": bytes([0, 0, 0]) + SEED + bytes([3, 1, 1, 8, 1, 1, 0, 2]),
    "extreme_d_max": bytes([1, 0, 0]) + SEED + bytes([3, 1, 1, 1, 1, 9, 0, 2]),
    "extreme_negative": bytes([0, 0, 0]) + SEED + bytes([3, 10, 1, 1, 1, 1, 0, 2]),
    "extreme_scale_inf": bytes([0, 0, 0]) + SEED + bytes([3, 1, 1, 1, 1, 1, 3, 2]),
}

# fuzz_rows.c: fn isa threads seed[8] class (% 8 == 7: bad call: 2 edge-size indexes into
#   -1 MIN 0 1 2^31 2^62 MAX) then
#   row kernels (fn 0 layernorm, 1 its backward, 2 softmax, 3 log_softmax, 4/5 their
#     backward, 6 cross-entropy, 7 its backward): size-flags (0x80: 300.. x 256) rows [cols]
#     value-mode (0 raw floats) range-index (1 8 100 1e4) flags (0x40: tied row maxima)
#     [raw values] [cross-entropy: a byte per row, % 5 == 0 gives -100]
#   training kernels: flags (0x80: big) then 8 Adam: count, per tensor numel steps, lr;
#     9/10 embedding (backward): vocab dim [n]; 11/12 ReLU (backward): [n] mode per element
ROWS = {
    "layernorm": bytes([0, 0, 0]) + SEED + bytes([0, 0, 3, 17, 1, 1, 0x07]),
    "layernorm_backward": bytes([1, 1, 1]) + SEED + bytes([0, 0, 4, 9, 1, 1, 0x3b]),
    "softmax_tied_large": bytes([2, 1, 0]) + SEED + bytes([0, 0, 3, 8, 1, 3, 0x41]),
    "log_softmax_in_place": bytes([3, 0, 1]) + SEED + bytes([0, 0, 2, 5, 1, 2, 0x03]),
    "softmax_backward": bytes([4, 1, 2]) + SEED + bytes([0, 0, 3, 7, 1, 1, 0x05]),
    "log_softmax_backward_threads": bytes([5, 2, 2]) + SEED + bytes([0, 0x80, 3, 1, 1, 0x00]),
    "log_softmax_specials": bytes([3, 1, 0]) + SEED + bytes([0, 0, 2, 6, 0, 0, 0]) + SPECIALS,
    "cross_entropy": bytes([6, 1, 0]) + SEED + bytes([0, 0, 4, 6, 1, 3, 0x41, 1, 1, 1, 1]),
    "cross_entropy_backward_tied": bytes([7, 1, 1]) + SEED + bytes([0, 0, 3, 4, 1, 3, 0x41, 1, 1, 1]),
    "cross_entropy_bad_target": bytes([7, 0, 0]) + SEED + bytes([0, 0, 3, 4, 1, 0, 0x03, 1, 1, 1]),
    "cross_entropy_threads": bytes([7, 2, 2]) + SEED + bytes([0, 0x80, 5, 1, 2, 0x41]),
    "adam": bytes([8, 1, 1]) + SEED + bytes([0, 0x01, 3, 5, 1, 7, 3, 0, 9, 2]),
    "adamw_threads": bytes([8, 2, 2]) + SEED + bytes([0, 0x82, 1, 10, 4, 0]),
    "adam_bad_lr": bytes([8, 0, 0]) + SEED + bytes([0, 0x04, 1, 5, 1, 1]),
    "embedding": bytes([9, 1, 0]) + SEED + bytes([0, 0x00, 7, 5, 6]),
    "embedding_bad_id": bytes([9, 0, 0]) + SEED + bytes([0, 0x03, 7, 5, 6]),
    "embedding_backward": bytes([10, 1, 2]) + SEED + bytes([0, 0x04, 5, 3, 9]),
    "embedding_backward_threads": bytes([10, 2, 2]) + SEED + bytes([0, 0x80, 9, 8]),
    "relu_in_place": bytes([11, 1, 0]) + SEED + bytes([0, 0x01, 20]) + bytes([1] * 20),
    "relu_backward_threads": bytes([12, 2, 2]) + SEED + bytes([0, 0x80]),
    "bad_softmax_huge": bytes([2, 0, 0]) + SEED + bytes([7, 5, 6]),
    "bad_cross_entropy_cols0": bytes([6, 0, 0]) + SEED + bytes([7, 5, 2]),
    "bad_adam_negative": bytes([8, 0, 0]) + SEED + bytes([7, 0, 3]),
    "bad_embedding": bytes([9, 0, 0]) + SEED + bytes([7, 6, 4]),
}


def write(harness, seeds):
    folder = os.path.join(HERE, "corpus", harness)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(bytes(data))


if __name__ == "__main__":
    write("gemm", GEMM)
    write("gelu", GELU)
    write("tensor", TENSOR)
    write("attention", ATTENTION)
    write("rows", ROWS)
    print(f"wrote {len(GEMM)} + {len(GELU)} + {len(TENSOR)} + {len(ATTENTION)} + {len(ROWS)} seeds under "
          f"{os.path.join(HERE, 'corpus')}")
