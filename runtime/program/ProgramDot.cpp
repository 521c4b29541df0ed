// programToDot: the Program as a Graphviz digraph.
#include "runtime/program/ProgramDot.h"

#include <sstream>
#include <vector>

namespace spmd::runtime {
namespace {

// A DOT string literal's contents: quotes and backslashes escaped, newlines as \n.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string typeOf(const BufferDesc& buffer) {
  std::string text(dtypeName(buffer.dtype));
  text += "[";
  for (size_t i = 0; i < buffer.shape.size(); ++i) text += (i ? "," : "") + std::to_string(buffer.shape[i]);
  return text + "]";
}

}  // namespace

std::string programToDot(const Program& program) {
  std::ostringstream dot;
  dot << "digraph " << quoted(program.name.empty() ? "program" : program.name) << " {\n"
      << "  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n  edge [fontsize=8];\n";
  // dot's network-simplex and crossing passes grow steeply with size: a training step of
  // ResNet-18 (~650 steps) takes minutes with the defaults and ~3 s with these limits.
  if (program.steps.size() > 100) dot << "  graph [nslimit=1, nslimit1=1, mclimit=0.1, splines=line];\n";
  // Who writes each buffer: "in<k>" for inputs, "s<i>" for steps; constants have no node.
  std::vector<std::string> writer(program.buffers.size());
  for (size_t k = 0; k < program.inputs.size(); ++k) {
    std::string node = "in" + std::to_string(k);
    writer[program.inputs[k]] = node;
    dot << "  " << node << " [shape=ellipse, label="
        << quoted("input " + std::to_string(k) + "\n" + typeOf(program.buffers[program.inputs[k]])) << "];\n";
  }
  auto edge = [&](int buffer, const std::string& to) {
    if (buffer < 0 || size_t(buffer) >= writer.size() || writer[buffer].empty()) return;
    dot << "  " << writer[buffer] << " -> " << to << " [label=" << quoted(typeOf(program.buffers[buffer])) << "];\n";
  };
  for (size_t i = 0; i < program.steps.size(); ++i) {
    const Step& step = program.steps[i];
    std::string node = "s" + std::to_string(i);
    std::string label = step.op + "\n" + (step.layer.empty() ? step.location : step.layer);
    dot << "  " << node << " [shape=box, label=" << quoted(label) << "];\n";
    for (int in : step.inputs) edge(in, node);
    for (int out : step.outputs)
      if (out >= 0 && size_t(out) < writer.size()) writer[out] = node;
  }
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    std::string node = "out" + std::to_string(k);
    dot << "  " << node << " [shape=doublecircle, label=" << quoted("output " + std::to_string(k)) << "];\n";
    edge(program.outputs[k], node);
  }
  dot << "}\n";
  return dot.str();
}

}  // namespace spmd::runtime
