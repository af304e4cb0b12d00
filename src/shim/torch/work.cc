#include "shim/torch/work.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "shim/torch/session.h"

namespace prism::torch_shim {

namespace {

// A Future holding tensors must know their devices; CPU needs none.
std::vector<c10::Device> devices_of(const std::vector<at::Tensor>& tensors) {
  std::vector<c10::Device> out;
  for (const at::Tensor& t : tensors) {
    if (!t.device().is_cpu() && std::find(out.begin(), out.end(), t.device()) == out.end())
      out.push_back(t.device());
  }
  return out;
}

}  // namespace

PrismWork::PrismWork(int rank, c10d::OpType type, std::string what, std::vector<at::Tensor> outputs,
                     std::function<void()> effect)
    : c10d::Work(rank, type),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      effect_(std::move(effect)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), devices_of(outputs_))) {}

PrismWork::~PrismWork() = default;

void PrismWork::complete(const std::string& error) {
  std::exception_ptr failure;
  if (!error.empty()) {
    failure = std::make_exception_ptr(std::runtime_error(error));
  } else if (effect_) {
    try {
      effect_();
    } catch (const std::exception& e) {
      failure = std::make_exception_ptr(
          std::runtime_error("prism: " + what_ + ": writing the result: " + e.what()));
    }
  }
  effect_ = nullptr;
  finish(failure);
  // The future's callbacks run here and may enter new ops: the Session's
  // lock is not held.
  if (failure) {
    future_->setError(failure);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

void PrismWork::await_completion() {
  // Even when the work has completed: in a capture the wait is still said
  // on the wire (Session::wait returns at once otherwise).
  Session::get().wait(entry_);
  // When the progress thread took the completion, it finishes the work in
  // a moment, outside the Session's lock.
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return completed_; });
}

bool PrismWork::isCompleted() {
  std::lock_guard lock(mutex_);
  return completed_;
}

bool PrismWork::isSuccess() const {
  std::lock_guard lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr PrismWork::exception() const {
  std::lock_guard lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> PrismWork::result() {
  return outputs_;
}

void PrismWork::synchronize() {
  await_completion();
}

bool PrismWork::wait(std::chrono::milliseconds /*timeout*/) {
  await_completion();
  std::lock_guard lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> PrismWork::getFuture() {
  return future_;
}

}  // namespace prism::torch_shim
