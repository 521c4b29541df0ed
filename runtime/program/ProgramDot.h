// A Graphviz (DOT) view of a Program: one box per step (op, layer path or source line), the
// function's inputs and outputs as ellipses, an edge per buffer from the step that writes it to
// each step that reads it, labelled with its dtype and shape. The compiler writes it as
// program.dot beside the IR dumps; `dot -Tsvg program.dot -o step.svg` draws it.
#pragma once

#include <string>

#include "runtime/program/Program.h"

namespace spmd::runtime {

std::string programToDot(const Program& program);

}  // namespace spmd::runtime
