// spmd::checkpoint's segment marks (frontend/Remat.h).
#include "frontend/Remat.h"

#include <exception>

#include "frontend/Trace.h"
#include "ir/SpmdAttributes.h"
#include "mlir/IR/Builders.h"

namespace spmd::detail {

RematSegment::RematSegment(Loc loc) : exceptions_(std::uncaught_exceptions()) {
  Trace& trace = Trace::current("checkpoint", loc);
  trace_ = &trace;
  mlir::OpBuilder& b = trace.builder();
  mlir::Block* block = b.getInsertionBlock();
  block_ = block;
  auto at = b.getInsertionPoint();
  before_ = at == block->begin() ? nullptr : &*std::prev(at);
  segment_ = trace.nextRematSegment();
}

RematSegment::~RematSegment() {
  if (std::uncaught_exceptions() > exceptions_) return;
  auto* block = static_cast<mlir::Block*>(block_);
  auto* before = static_cast<mlir::Operation*>(before_);
  mlir::OpBuilder& b = static_cast<Trace*>(trace_)->builder();
  // Up to where the trace records next (the block's end, unless something moved it).
  auto end = b.getInsertionBlock() == block ? b.getInsertionPoint() : block->end();
  auto it = before ? std::next(before->getIterator()) : block->begin();
  for (; it != end; ++it)
    if (!it->hasAttr(ir::kRematAttr))  // an inner checkpoint's op stays in its own segment
      it->setAttr(ir::kRematAttr, b.getI64IntegerAttr(segment_));
}

}  // namespace spmd::detail
