/*
 * isa.h -- private: which instruction set the kernels may use right now.
 *
 * Kernels call tt::active_isa() once per call and pick the matching micro-kernel.
 * The active ISA is always one that is both compiled in and supported by the CPU
 * (tt_set_isa refuses anything else), so a kernel never executes an instruction
 * the CPU lacks.
 */
#pragma once
#include "tinytorch/tinytorch.h"

namespace tt {

tt_isa active_isa();

/* The CPU (and OS) support the F16C conversion instructions. */
bool cpu_has_f16c();

}  // namespace tt
