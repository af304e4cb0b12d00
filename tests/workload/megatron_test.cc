#include "workload/megatron.h"

#include <gtest/gtest.h>
