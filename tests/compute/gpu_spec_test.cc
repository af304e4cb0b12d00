#include "compute/gpu_spec.h"

#include <gtest/gtest.h>
