#include "workload/job_spec.h"

#include <gtest/gtest.h>
