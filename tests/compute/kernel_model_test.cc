#include "compute/kernel_model.h"

#include <gtest/gtest.h>
