// The software a job runs: its Megatron-Core and Transformer Engine
// releases, given by number or through the NeMo Framework container that
// ships them (docs/job-spec.md, "software", has the table and its sources).
//
// A release matters only where Megatron-Core or Transformer Engine lacks a
// job-spec field's feature before some release: validate_software() then
// names the field and the release that introduced it. No default of a
// modelled field differs between Megatron-Core 0.7.0 and 0.14.0 (read in
// each release), nor a kernel PrismLLM models, so the release never changes
// a simulation, only what is accepted.
// Not given: no release check, today's behaviour (every field accepted).
#pragma once

#include <compare>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace prism {

struct JobSpec;

// A release number: "0.13.0", "2.4" (patch 0), "2.7.0". Unset: all zero.
struct Version {
  int major = 0, minor = 0, patch = 0;
  bool given() const { return major != 0 || minor != 0 || patch != 0; }
  auto operator<=>(const Version&) const = default;
};

// "0.13.0" -> {0, 13, 0}; one to three dot-separated numbers, no suffix.
Result<Version> parse_version(std::string_view text);
// "0.13.0"; two parts when the patch is 0 and `short_form` ("2.4").
std::string to_string(const Version& v, bool short_form = false);

struct SoftwareSpec {
  std::string nemo;  // NeMo Framework container release ("24.07"), or empty
  Version megatron_core;
  Version transformer_engine;
};

// The releases a NeMo Framework container ships, as its release notes list
// them; transformer_engine is unset where they do not say.
struct ContainerRelease {
  std::string_view nemo;
  Version megatron_core;
  Version transformer_engine;
};
const std::vector<ContainerRelease>& nemo_releases();

// The job's Megatron-Core and TE releases: the container's, with any release
// given beside it required to agree. Errors name software.<field>.
Result<SoftwareSpec> resolve_software(const SoftwareSpec& s);

// Every field of `job` the releases lack, as one error naming the field and
// the release that introduced it; ok when no release is given.
Status validate_software(const JobSpec& job);

}  // namespace prism
