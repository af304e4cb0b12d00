// How a node failure (--fail-node, replay/result.h NodeFailureReplay) reads
// in the summaries of `prism replay` and `prism simulate` and in their JSON
// reports: the node and when it stopped, whether the job hung, each
// communication op that never completes with the ranks waiting in it, and
// when torch's NCCL watchdog would end the job.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "replay/result.h"

namespace prism {

// Lines of "label:  value", the labels padded to `label_width`.
std::string node_failure_text(const NodeFailureReplay& f, int label_width);
// The report's "node_failure" object (docs/cli.md).
nlohmann::ordered_json node_failure_json(const NodeFailureReplay& f);

}  // namespace prism
