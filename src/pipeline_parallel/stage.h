#pragma once
// What the pipeline executor needs from one model chunk. GPTModel is the real one; the
// bubble benchmark uses a synthetic stage that only waits, so oversubscribed ranks do not
// distort the measured schedule.
#include <stdexcept>

namespace trident::pipeline_parallel {

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  // Returns the loss sum on the last virtual stage, 0 elsewhere. first_sample: run-wide
  // index of the micro-batch's first sample (names dropout masks); < 0 when evaluating.
  virtual double forward_chunk(int slot, const int* tokens, int batch, int seq, float grad_scale,
                               float* per_token_loss, long first_sample) = 0;
  virtual void backward_chunk(int slot, int batch, int seq) = 0;
  // Zero-bubble schedules split backward_chunk in two: the input gradients (B), keeping what
  // the weight gradients need under `key` (the micro-batch; the slot is free after B), and
  // later the weight gradients of that micro-batch (W).
  virtual void backward_input_chunk(int slot, int batch, int seq, int key) {
    throw std::logic_error("this pipeline stage cannot split its backward into B and W");
  }
  virtual void weight_chunk(int key) {
    throw std::logic_error("this pipeline stage cannot split its backward into B and W");
  }
  virtual float* input_buffer(int slot) = 0;
  virtual const float* output_buffer(int slot) const = 0;
  virtual float* output_grad_buffer(int slot) = 0;
  virtual const float* input_grad() const = 0;
};

}  // namespace trident::pipeline_parallel
