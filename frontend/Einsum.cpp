#include "frontend/Einsum.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "frontend/Composed.h"
#include "frontend/Indexing.h"
#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "runtime/base/Error.h"

namespace spmd {

using detail::where;

namespace {

// A label: a letter's character, or kEllipsis + k for the k-th axis "..." stands for (counted
// over the widest operand's, right-aligned).
using Label = int;
constexpr Label kEllipsis = 256;

std::string labelText(Label l) {
  return l >= kEllipsis ? "... axis " + std::to_string(l - kEllipsis) : std::string("'") + char(l) + "'";
}

// A value with a label per axis.
struct Labeled {
  Tensor value;
  std::vector<Label> labels;
};

class Einsum {
 public:
  Einsum(const std::string& equation, const std::vector<Tensor>& operands, Loc loc)
      : operands_(operands), loc_(loc), at_(where(loc) + ": spmd::einsum(\"" + equation + "\"): ") {
    parse(equation);
  }

  Tensor run() {
    std::vector<Labeled> terms;
    for (size_t i = 0; i < operands_.size(); ++i) terms.push_back({operands_[i], inputs_[i]});
    // Each operand's diagonals taken and its own labels summed; then left to right, pairwise.
    Labeled acc = reduced(diagonals(terms[0]), needed(terms, 0));
    for (size_t i = 1; i < terms.size(); ++i) acc = contract(acc, diagonals(terms[i]), needed(terms, i));
    // The output's order.
    std::vector<int64_t> perm;
    for (Label l : output_) perm.push_back(std::find(acc.labels.begin(), acc.labels.end(), l) - acc.labels.begin());
    bool identity = true;
    for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == int64_t(k);
    return identity ? acc.value : transpose(acc.value, perm, loc_);
  }

 private:
  // Parses the equation into each operand's labels and the output's, checked against the operands.
  void parse(const std::string& text) {
    std::string eq;
    for (char c : text)
      if (c != ' ') eq += c;
    const size_t arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::vector<std::string> terms;
    for (size_t from = 0;;) {
      const size_t comma = lhs.find(',', from);
      terms.push_back(lhs.substr(from, comma - from));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
    if (operands_.empty()) throw Error(at_ + "give at least one operand");
    if (terms.size() != operands_.size())
      throw Error(at_ + "the equation names " + std::to_string(terms.size()) + " operands before '->', " +
                  std::to_string(operands_.size()) + " are given");
    for (size_t i = 0; i < operands_.size(); ++i) {
      const Tensor& x = operands_[i];
      if (x.dtype() == DType::i32 || x.dtype() != operands_[0].dtype())
        throw Error(at_ + "operand " + std::to_string(i) + " is " + x.typeString() + "; the operands must share one float "
                    "dtype (operand 0 is " + operands_[0].typeString() + ": spmd::cast the others)");
    }
    // Letters and the ellipsis of each term; the widest ellipsis fixes its labels.
    std::vector<std::vector<Label>> letters(terms.size());
    std::vector<int64_t> ellipsisAt(terms.size(), -1);
    int64_t widest = 0;
    for (size_t i = 0; i < terms.size(); ++i) {
      scan(terms[i], "operand " + std::to_string(i), letters[i], ellipsisAt[i]);
      const int64_t named = int64_t(letters[i].size()), rank = operands_[i].rank();
      if (ellipsisAt[i] < 0 ? named != rank : named > rank)
        throw Error(at_ + "operand " + std::to_string(i) + " " + operands_[i].typeString() + " has " +
                    std::to_string(rank) + " axes, its term '" + terms[i] + "' names " + std::to_string(named) +
                    (ellipsisAt[i] < 0 ? " (add ... for the others)" : ""));
      if (ellipsisAt[i] >= 0) widest = std::max(widest, rank - named);
    }
    for (size_t i = 0; i < terms.size(); ++i) {
      std::vector<Label> labels = letters[i];
      if (ellipsisAt[i] >= 0) {
        const int64_t extra = operands_[i].rank() - int64_t(labels.size());
        std::vector<Label> dots;
        for (int64_t k = 0; k < extra; ++k) dots.push_back(kEllipsis + int(widest - extra + k));
        labels.insert(labels.begin() + ellipsisAt[i], dots.begin(), dots.end());
      }
      inputs_.push_back(labels);
    }
    // Each label's size: the operands' sizes, equal or 1.
    for (size_t i = 0; i < inputs_.size(); ++i)
      for (size_t a = 0; a < inputs_[i].size(); ++a) {
        const Label l = inputs_[i][a];
        const int64_t size = operands_[i].dim(int64_t(a));
        auto [it, fresh] = sizes_.emplace(l, size);
        if (fresh || it->second == size || size == 1) continue;
        if (it->second != 1)
          throw Error(at_ + "label " + labelText(l) + " is " + std::to_string(it->second) + " long in one place and " +
                      std::to_string(size) + " in operand " + std::to_string(i) + " " + operands_[i].typeString() +
                      "; a label's axes must have one size, or 1");
        it->second = size;
      }
    // The output.
    std::map<Label, int> uses;
    for (const auto& labels : inputs_)
      for (Label l : labels) ++uses[l];
    if (arrow == std::string::npos) {
      for (int64_t k = 0; k < widest; ++k) output_.push_back(kEllipsis + int(k));
      for (const auto& [l, count] : uses)  // std::map: ASCII order
        if (l < kEllipsis && count == 1) output_.push_back(l);
      return;
    }
    std::vector<Label> outLetters;
    int64_t outEllipsis = -1;
    scan(eq.substr(arrow + 2), "the output", outLetters, outEllipsis);
    for (Label l : outLetters)
      if (!uses.count(l))
        throw Error(at_ + "the output's label " + labelText(l) + " names no operand's axis");
    if (widest > 0 && outEllipsis < 0)
      throw Error(at_ + "the operands' ... stands for " + std::to_string(widest) +
                  " axes the output leaves out; put ... in the output (numpy's and jax's rule), or sum them");
    output_ = outLetters;
    if (outEllipsis >= 0)
      for (int64_t k = 0; k < widest; ++k) output_.insert(output_.begin() + outEllipsis + k, kEllipsis + int(k));
  }

  // The letters of one term in order, and where its "..." stands among them (-1: none).
  void scan(const std::string& term, const std::string& which, std::vector<Label>& letters, int64_t& ellipsis) {
    std::set<Label> seen;
    for (size_t c = 0; c < term.size(); ++c) {
      if (term.compare(c, 3, "...") == 0) {
        if (ellipsis >= 0) throw Error(at_ + which + "'s term '" + term + "' holds ... twice");
        ellipsis = int64_t(letters.size());
        c += 2;
        continue;
      }
      if (!std::isalpha(static_cast<unsigned char>(term[c])))
        throw Error(at_ + which + "'s term '" + term + "' holds '" + term[c] +
                    "'; labels are letters a-z and A-Z, with one ... at most");
      if (which == "the output" && !seen.insert(term[c]).second)
        throw Error(at_ + "the output names label '" + std::string(1, term[c]) + "' twice");
      letters.push_back(term[c]);
    }
  }

  // The labels a term's result must keep: those of later operands and the output.
  std::set<Label> needed(const std::vector<Labeled>& terms, size_t i) const {
    std::set<Label> keep(output_.begin(), output_.end());
    for (size_t j = i + 1; j < terms.size(); ++j) keep.insert(terms[j].labels.begin(), terms[j].labels.end());
    return keep;
  }

  // x with each repeated label's axes made one: its diagonal, at the first's place.
  Labeled diagonals(Labeled x) const {
    for (size_t a = 0; a < x.labels.size(); ++a)
      for (size_t b = a + 1; b < x.labels.size(); ++b) {
        if (x.labels[a] != x.labels[b]) continue;
        const int64_t n = x.value.dim(int64_t(a));
        if (x.value.dim(int64_t(b)) != n)
          throw Error(at_ + "label " + labelText(x.labels[a]) + " repeats in one operand over axes of " +
                      std::to_string(n) + " and " + std::to_string(x.value.dim(int64_t(b))) + "; a diagonal needs one size");
        // Axes a and b first, their diagonal, then the others back in order with it at a's place.
        std::vector<int64_t> perm = {int64_t(a), int64_t(b)};
        std::vector<Label> rest;
        for (size_t d = 0; d < x.labels.size(); ++d)
          if (d != a && d != b) perm.push_back(int64_t(d)), rest.push_back(x.labels[d]);
        const Tensor positions = arange(n, DType::i32, loc_);
        Tensor diagonal = indexGet(transpose(x.value, perm, loc_), {positions, positions}, loc_);
        std::vector<int64_t> back;
        for (size_t d = 1; d <= a; ++d) back.push_back(int64_t(d));
        back.push_back(0);
        for (size_t d = a + 1; d <= rest.size(); ++d) back.push_back(int64_t(d));
        rest.insert(rest.begin() + int64_t(a), x.labels[a]);
        return diagonals({transpose(diagonal, back, loc_), rest});
      }
    return x;
  }

  // x with the labels in neither `keep` nor `other` summed away.
  Labeled reduced(Labeled x, const std::set<Label>& keep, const std::vector<Label>& other = {}) const {
    std::vector<int64_t> axes;
    std::vector<Label> kept;
    for (size_t a = 0; a < x.labels.size(); ++a) {
      const Label l = x.labels[a];
      if (keep.count(l) || std::count(other.begin(), other.end(), l)) kept.push_back(l);
      else axes.push_back(int64_t(a));
    }
    if (axes.empty()) return x;
    return {sum(x.value, axes, loc_), kept};
  }

  // x's axes as `order` (labels it has), each broadcast to its label's size, then reshaped to
  // `shape`.
  Tensor arranged(const Labeled& x, const std::vector<Label>& order, const Shape& shape) const {
    std::vector<int64_t> perm;
    Shape full;
    for (Label l : order) {
      perm.push_back(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin());
      full.push_back(sizes_.at(l));
    }
    Tensor t = transpose(x.value, perm, loc_);
    if (t.shape() != full) t = broadcastTo(t, full, loc_);
    return reshape(t, shape, loc_);
  }

  // a and b contracted: shared labels in `keep` are batch axes, the other shared ones summed,
  // as one (batched) matmul; the result's labels are batch, a's own, b's own.
  Labeled contract(Labeled a, Labeled b, const std::set<Label>& keep) const {
    a = reduced(a, keep, b.labels);
    b = reduced(b, keep, a.labels);
    std::vector<Label> batch, summed, aOwn, bOwn;
    for (Label l : a.labels) {
      const bool shared = std::count(b.labels.begin(), b.labels.end(), l) > 0;
      (shared ? (keep.count(l) ? batch : summed) : aOwn).push_back(l);
    }
    for (Label l : b.labels)
      if (!std::count(a.labels.begin(), a.labels.end(), l)) bOwn.push_back(l);
    auto extent = [&](const std::vector<Label>& ls) {
      int64_t n = 1;
      for (Label l : ls) n *= sizes_.at(l);
      return n;
    };
    const int64_t B = extent(batch), M = extent(aOwn), K = extent(summed), N = extent(bOwn);
    auto join = [](std::vector<Label> x, const std::vector<Label>& y) {
      x.insert(x.end(), y.begin(), y.end());
      return x;
    };
    const bool batched = !batch.empty();
    const Tensor lhs = arranged(a, join(join(batch, aOwn), summed), batched ? Shape{B, M, K} : Shape{M, K});
    const Tensor rhs = arranged(b, join(join(batch, summed), bOwn), batched ? Shape{B, K, N} : Shape{K, N});
    const std::vector<Label> labels = join(join(batch, aOwn), bOwn);
    Shape shape;
    for (Label l : labels) shape.push_back(sizes_.at(l));
    return {reshape(matmul(lhs, rhs, {}, {}, loc_), shape, loc_), labels};
  }

  std::vector<Tensor> operands_;
  Loc loc_;
  std::string at_;
  std::vector<std::vector<Label>> inputs_;
  std::vector<Label> output_;
  std::map<Label, int64_t> sizes_;
};

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands, Loc loc) {
  detail::Trace::current("einsum", loc);
  return Einsum(equation, operands, loc).run();
}

}  // namespace spmd
