#include "compute/kernel_model.h"
