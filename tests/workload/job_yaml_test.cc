#include "workload/job_yaml.h"

#include <gtest/gtest.h>
