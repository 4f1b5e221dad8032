// How a backward op writes an input gradient into its output buffer.
#pragma once

namespace strata::executor {

// accumulate (+=): the buffer already holds gradient from elsewhere (micro-batch accumulation, a
// residual branch, a second consumer of the same activation). overwrite (=): this op is the
// buffer's only writer, so the caller need not zero it first and the op need not read it — on the
// GPU that saves a memset and a read of the whole buffer (a GPT-2 1.3B layer's backward zeroed
// about 1 GB of such buffers per micro-batch).
enum class GradientWrite { accumulate, overwrite };

}  // namespace strata::executor
