#include "pipeline_parallel/executor.h"

#include <chrono>
#include <ctime>
#include <stdexcept>
#include <thread>

namespace trident::pipeline_parallel {

PipelineExecutor::PipelineExecutor(const ScheduleConfig& schedule,
                                   std::vector<PipelineStage*> chunks, comm::Communicator& pipeline,
                                   comm::Communicator& tensor, int micro_batch, int seq, int hidden,
                                   ExecutorOptions options)
    : schedule_(schedule),
      chunks_(std::move(chunks)),
      pipeline_(pipeline),
      tensor_(tensor),
      micro_batch_(micro_batch),
      seq_(seq),
      stage_(pipeline.rank()),
      boundary_floats_((long)micro_batch * seq * hidden),
      options_(options),
      ops_(build_schedule(schedule, pipeline.rank())),
      origin_(std::chrono::steady_clock::now()) {
  if (options_.sequence_parallel && tensor.size() > 1) {
    boundary_floats_ /= tensor.size();  // the model checked that t divides the rows
    options_.scatter_gather = false;
  }
  if (boundary_floats_ % tensor.size() != 0) options_.scatter_gather = false;
  std::vector<int> slots = max_in_flight(ops_, schedule.chunks);
  free_slots_.resize(schedule.chunks);
  slot_of_.resize(schedule.chunks);
  for (int j = 0; j < schedule.chunks; ++j)
    for (int k = slots[j] - 1; k >= 0; --k) free_slots_[j].push_back(k);
  send_buffers_.resize(schedule.microbatches * schedule.chunks);
}

void PipelineExecutor::set_microbatches(int microbatches) {
  if (microbatches == schedule_.microbatches) return;
  ScheduleConfig next = schedule_;
  next.microbatches = microbatches;
  std::vector<PipelineOp> ops = build_schedule(next, stage_);
  std::vector<int> need = max_in_flight(ops, next.chunks);
  for (int j = 0; j < next.chunks; ++j)
    if (need[j] > (int)free_slots_[j].size())
      throw std::logic_error("pipeline: " + std::to_string(microbatches) +
                             " micro-batches need more activation slots than were planned");
  schedule_ = next;
  ops_ = std::move(ops);
  send_buffers_.resize((size_t)microbatches * next.chunks);
}

double PipelineExecutor::thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

double PipelineExecutor::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - origin_)
      .count();
}

void PipelineExecutor::record(const std::string& name, const std::string& category, double start_us,
                              double end_us) {
  events_.push_back({name, category, options_.world_rank, start_us, end_us - start_us});
}

void PipelineExecutor::record_compute(const std::string& name, const std::string& category,
                                      const PipelineOp& op, double start_us, double cpu_start_us) {
  events_.push_back({name, category, options_.world_rank, start_us, now_us() - start_us,
                     thread_cpu_us() - cpu_start_us, op.chunk});
}

int PipelineExecutor::take_slot(int chunk, int microbatch) {
  auto it = slot_of_[chunk].find(microbatch);
  if (it != slot_of_[chunk].end()) return it->second;
  if (free_slots_[chunk].empty()) throw std::logic_error("pipeline: no free activation slot");
  int slot = free_slots_[chunk].back();
  free_slots_[chunk].pop_back();
  slot_of_[chunk][microbatch] = slot;
  return slot;
}

void PipelineExecutor::send(const float* data, const PipelineOp& op) {
  const int t = tensor_.size();
  long count = boundary_floats_, offset = 0;
  if (options_.scatter_gather && t > 1) count /= t, offset = count * tensor_.rank();
  if (training_) boundary_bytes_ += count * (long)sizeof(float);
  pending_sends_.push_back(
      pipeline_.isend(data + offset, count, op.peer, message_tag(schedule_, op, stage_)));
}

void PipelineExecutor::receive(float* data, const PipelineOp& op) {
  const int t = tensor_.size();
  if (!(options_.scatter_gather && t > 1)) {
    pipeline_.irecv(data, boundary_floats_, op.peer, message_tag(schedule_, op, stage_))->wait();
    return;
  }
  const long count = boundary_floats_ / t;
  gather_buffer_.resize(count);
  pipeline_.irecv(gather_buffer_.data(), count, op.peer, message_tag(schedule_, op, stage_))
      ->wait();
  tensor_.all_gather(gather_buffer_.data(), data, count);
}

double PipelineExecutor::train_step(const std::function<const int*(int)>& tokens_of,
                                    float grad_scale,
                                    const std::function<long(int)>& first_sample_of) {
  double loss = 0.0;
  training_ = true;
  const double step_start = now_us();
  record("train step", "step", step_start, step_start);  // where this rank's step begins
  std::vector<int> backwards_done(schedule_.chunks, 0);
  for (const PipelineOp& op : ops_) {
    PipelineStage& chunk = *chunks_[op.chunk];
    const double start = now_us(), cpu_start = thread_cpu_us();
    const std::string name = to_string(op);
    switch (op.type) {
      case OpType::kRecvForward:
        receive(chunk.input_buffer(take_slot(op.chunk, op.microbatch)), op);
        record(name, "recv", start, now_us());
        break;
      case OpType::kForward:
        if (options_.testing_forward_delay_ms > 0)
          std::this_thread::sleep_for(
              std::chrono::microseconds((long)(options_.testing_forward_delay_ms * 1e3)));
        if (before_forward_) before_forward_(op.chunk);
        loss += chunk.forward_chunk(take_slot(op.chunk, op.microbatch), tokens_of(op.microbatch),
                                    micro_batch_, seq_, grad_scale, nullptr,
                                    first_sample_of ? first_sample_of(op.microbatch) : -1);
        record_compute(name, "forward", op, start, cpu_start);
        break;
      case OpType::kSendForward:
        send(chunk.output_buffer(slot_of_[op.chunk].at(op.microbatch)), op);
        record(name, "send", start, now_us());
        break;
      case OpType::kRecvBackward:
        receive(chunk.output_grad_buffer(slot_of_[op.chunk].at(op.microbatch)), op);
        record(name, "recv", start, now_us());
        break;
      case OpType::kBackward: {
        int slot = slot_of_[op.chunk].at(op.microbatch);
        if (schedule_.splits_backward()) {  // B: its W finishes the gradients
          chunk.backward_input_chunk(slot, micro_batch_, seq_, op.microbatch);
        } else {
          if (before_backward_)
            before_backward_(op.chunk, ++backwards_done[op.chunk] == schedule_.microbatches);
          chunk.backward_chunk(slot, micro_batch_, seq_);
        }
        // The slot can go to the next forward: what W reads stays with the micro-batch
        // (GPTModel hands the slot's held activations over to it until its W).
        slot_of_[op.chunk].erase(op.microbatch);
        free_slots_[op.chunk].push_back(slot);
        record_compute(name, "backward", op, start, cpu_start);
        break;
      }
      case OpType::kWeight:
        if (before_backward_)
          before_backward_(op.chunk, ++backwards_done[op.chunk] == schedule_.microbatches);
        chunk.weight_chunk(op.microbatch);
        record_compute(name, "weight", op, start, cpu_start);
        break;
      case OpType::kSendBackward: {
        // input_grad() is scratch reused by the next backward: send from a private copy.
        std::vector<float>& buf = send_buffers_[op.microbatch * schedule_.chunks + op.chunk];
        buf.assign(chunk.input_grad(), chunk.input_grad() + boundary_floats_);
        send(buf.data(), op);
        record(name, "send", start, now_us());
        break;
      }
    }
  }
  const double start = now_us();
  for (auto& r : pending_sends_) r->wait();
  pending_sends_.clear();
  record("wait for sends", "wait", start, now_us());
  training_ = false;
  pipeline_.all_reduce(&loss, 1, comm::ReduceOp::kSum);  // only the last stage has a loss
  return loss;
}

double PipelineExecutor::evaluate(const std::function<const int*(int)>& tokens_of,
                                  int microbatches) {
  double loss = 0.0;
  const int p = schedule_.stages, last = p * schedule_.chunks - 1;
  for (int i = 0; i < microbatches; ++i)
    for (int j = 0; j < schedule_.chunks; ++j) {
      PipelineStage& chunk = *chunks_[j];
      const int vs = j * p + stage_;
      if (vs > 0 && p > 1)
        receive(chunk.input_buffer(0), {OpType::kRecvForward, i, j, (stage_ + p - 1) % p});
      if (options_.testing_forward_delay_ms > 0)  // evaluations have stragglers too
        std::this_thread::sleep_for(
            std::chrono::microseconds((long)(options_.testing_forward_delay_ms * 1e3)));
      loss += chunk.forward_chunk(0, tokens_of(i), micro_batch_, seq_, 0.f, nullptr, -1);
      if (vs < last && p > 1) {
        send(chunk.output_buffer(0), {OpType::kSendForward, i, j, (stage_ + 1) % p});
        pending_sends_.back()->wait();  // slot 0 is overwritten by the next forward
        pending_sends_.pop_back();
      }
    }
  pipeline_.all_reduce(&loss, 1, comm::ReduceOp::kSum);
  return loss;
}

}  // namespace trident::pipeline_parallel
