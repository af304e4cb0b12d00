#include "compute/kernel.h"

#include <gtest/gtest.h>
