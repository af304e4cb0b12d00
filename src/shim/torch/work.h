// PrismWork: the c10d Work of one backend call, completed in emulated time.
//
// It finishes once, when its Session entry completes: on the thread that
// calls wait() (prism_wait: the rank's virtual clock jumps exactly to the
// completion) or on the Session's progress thread (within a poll of the
// completion). Finishing applies the call's effect on this rank's data
// (op_mapping.h), then completes the Work and its Future, whose value is the
// call's output tensors, a List[Tensor] as DDP's reducer reads it. A failure
// (the emulation aborted, the coordinator refused an op) becomes the Work's
// exception and the Future's error, so that wait() throws the coordinator's
// words instead of hanging.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace prism::torch_shim {

class PrismWork : public c10d::Work {
 public:
  // `effect` runs once the ops have completed, before the Work finishes.
  PrismWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
            std::function<void()> effect);
  ~PrismWork() override;

  // The Session entry wait() holds on; set right after it was entered.
  void set_entry(std::uint64_t id) { entry_ = id; }
  // Called once by the Session: error is empty when the ops completed.
  void complete(const std::string& error);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  // Both hold the caller until the emulated completion; wait() rethrows a
  // failure. The timeout is not used: the client's own (PRISM_TIMEOUT_MS)
  // bounds every wait on the coordinator.
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  void await_completion();

  std::string what_;
  std::vector<at::Tensor> outputs_;
  std::function<void()> effect_;
  std::uint64_t entry_ = 0;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace prism::torch_shim
