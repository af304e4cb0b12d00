// What the fuzz targets share: a failed property is a finding.
//
// A target accepts any outcome of its loader (an error Status is the loader
// doing its job); what it must not see is a crash, a sanitizer report, a
// leak, or a property the loader's header promises failing, which
// PRISM_FUZZ_EXPECT turns into an abort that libFuzzer records with its input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define PRISM_FUZZ_EXPECT(cond, what)                                                   \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "fuzz: %s:%d: expected %s: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                          \
      std::abort();                                                                     \
    }                                                                                   \
  } while (false)
