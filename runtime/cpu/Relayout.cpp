// CPU relayout: one oneDNN reorder between the input's and the result's layouts (plain NCHW and
// a blocked nChw<B>c, either way). f64 runs the reference loop.
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Onednn.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::cpu {

void relayout(KernelCall& call) {
  if (call.in[0].dtype != DType::f32) return reference::relayout(call);
  Prepared& p = cachedState<Prepared>(call, [&] {
    auto from = layoutDesc(call.in[0]), to = layoutDesc(call.out[0]);
    Prepared prepared{dnnl::reorder(dnnl::reorder::primitive_desc(engine(), from, engine(), to)),
                      dnnl::stream(engine()), {}};
    prepared.bind(DNNL_ARG_FROM, from);
    prepared.bind(DNNL_ARG_TO, to);
    return prepared;
  });
  p.run({{DNNL_ARG_FROM, call.in[0].data}, {DNNL_ARG_TO, call.out[0].data}});
}

}  // namespace spmd::runtime::cpu
