// The consistency of a Program that comes from elsewhere (a file, another tool): every field
// checked against the others before anything runs, so that a damaged or hand-edited Program is
// a clear error, never a crash or a silently wrong result.
#pragma once

#include "runtime/program/Program.h"

namespace spmd::runtime {

// Throws spmd::Error naming the program, the buffer or step, and what disagrees:
//  - buffers: non-negative dimensions, element counts and byte sizes without overflow (at most
//    2^40 elements), constants of their buffer's size;
//  - inputs and outputs: valid, distinct inputs; every step operand written before it is read
//    (an input, a constant or an earlier step's result), every buffer written once at most, and
//    never an input or a constant;
//  - elementwise steps: the table's arity, operands of the result's shape and dtype;
//  - collectives against the replica count: all_gather's result is `replicas` times its
//    operand, reduce_scatter's operand `replicas` times its result, all_reduce's results are
//    its operands' shapes; a program without an axis has none and one replica;
//  - the call contract, when there is one: a placement per input and output (mapped and sliced
//    ones need an axis, a slice is ceil(full elements / replicas) long), each donor input paired
//    with at most one output of its dtype, shape and placement that does not pass an input through;
//  - the memory plan (checkMemoryPlan): planned buffers inside the arena, never overlapping
//    while both are live.
void checkProgram(const Program& program);

}  // namespace spmd::runtime
