#include "compute/kernel_db.h"

#include <gtest/gtest.h>
