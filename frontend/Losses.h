// Losses as torch.nn.functional's, composed of the DSL's ops (so their gradients come from those
// ops' VJPs): each takes the prediction, the target, a reduction (torch's `reduction=`, mean by
// default) and then the loss's own argument, in torch's order. The per-element losses of optax
// are the `LossReduction::none` results (optax.squared_error is mseLoss(..., none), optax.l2_loss
// half of it, optax.huber_loss huberLoss(..., none), optax.sigmoid_binary_cross_entropy
// binaryCrossEntropyWithLogits(..., none), optax.softmax_cross_entropy crossEntropy(..., none)
// with probabilities). Errors name the loss and the caller's line, while tracing.
#pragma once

#include "frontend/Tensor.h"

namespace spmd {

// How the per-element losses become the result, as torch's `reduction`: `none` keeps them (the
// input's shape; crossEntropy and nllLoss: the shape without the class axis), `mean` averages all
// of them, `sum` adds them up, `batchMean` adds them up and divides by the batch (the first
// dimension; kl_div's "batchmean", the KL divergence's true value per example).
enum class LossReduction { none, mean, sum, batchMean };

// (input - target)^2 (F.mse_loss). input and target have one float dtype and one shape: torch
// broadcasts a target of another shape with a warning, which hides a [N] against [N, 1] mistake;
// here it is an error (broadcastTo the target if that is what you mean).
Tensor mseLoss(const Tensor& input, const Tensor& target, LossReduction reduction = LossReduction::mean,
               Loc loc = Loc::current());
// |input - target| (F.l1_loss).
Tensor l1Loss(const Tensor& input, const Tensor& target, LossReduction reduction = LossReduction::mean,
              Loc loc = Loc::current());
// 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta beyond, d = input - target (F.smooth_l1_loss;
// beta = 0 is l1Loss). beta >= 0.
Tensor smoothL1Loss(const Tensor& input, const Tensor& target, LossReduction reduction = LossReduction::mean,
                    double beta = 1.0, Loc loc = Loc::current());
// 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) beyond (F.huber_loss, optax.huber_loss):
// smoothL1Loss times delta. delta > 0.
Tensor huberLoss(const Tensor& input, const Tensor& target, LossReduction reduction = LossReduction::mean,
                 double delta = 1.0, Loc loc = Loc::current());

// -(t log p + (1 - t) log(1 - p)) of probabilities p (F.binary_cross_entropy): each log is
// clamped at -100 as torch clamps it, so p = 0 or 1 gives 100, not inf.
Tensor binaryCrossEntropy(const Tensor& probabilities, const Tensor& target,
                          LossReduction reduction = LossReduction::mean, Loc loc = Loc::current());
// The same of sigmoid(logits), computed from the logits without overflow at any magnitude
// (F.binary_cross_entropy_with_logits): (1 - t) x + (1 + (w - 1) t) softplus(-x). `posWeight` w
// (optional; torch's pos_weight) weighs the positive term and broadcasts against the logits (one
// weight a class: shape [C] against [N, C]).
Tensor binaryCrossEntropyWithLogits(const Tensor& logits, const Tensor& target,
                                    LossReduction reduction = LossReduction::mean, const Tensor& posWeight = Tensor(),
                                    Loc loc = Loc::current());

// F.cross_entropy: logits [N, C] or [N, C, d1, ...] (classes on axis 1, as torch), and a target
// that is either i32 class indices [N] or [N, d1, ...] (an index outside [0, C) is a run-time
// error naming its position) or float class probabilities of the logits' shape (optax's
// softmax_cross_entropy). labelSmoothing in [0, 1] mixes the target with the uniform
// distribution, as torch's label_smoothing. Per-element losses have the target's shape without
// the class axis. An index equal to ignoreIndex (torch's default, -100: padding tokens, unlabeled
// pixels) adds nothing: its loss is 0 and the mean divides by the indices not ignored (NaN when
// every one is, as torch).
Tensor crossEntropy(const Tensor& logits, const Tensor& target, LossReduction reduction = LossReduction::mean,
                    double labelSmoothing = 0.0, int64_t ignoreIndex = -100, Loc loc = Loc::current());
// -logProbabilities[n, target[n], ...] (F.nll_loss): log-probabilities [N, C] or [N, C, d1, ...]
// (logSoftmax over axis 1) and i32 targets [N] or [N, d1, ...]; ignoreIndex as crossEntropy's.
Tensor nllLoss(const Tensor& logProbabilities, const Tensor& target, LossReduction reduction = LossReduction::mean,
               int64_t ignoreIndex = -100, Loc loc = Loc::current());
// target (log target - input) of log-probabilities `input` (F.kl_div; 0 where the target is 0, as
// torch's xlogy); with logTarget the target is given as log-probabilities too. torch's default
// "mean" averages over every element; the KL divergence per example is LossReduction::batchMean.
Tensor klDiv(const Tensor& input, const Tensor& target, LossReduction reduction = LossReduction::mean,
             bool logTarget = false, Loc loc = Loc::current());

}  // namespace spmd
