#include "workload/model_stats.h"

#include <gtest/gtest.h>
