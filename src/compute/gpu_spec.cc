#include "compute/gpu_spec.h"
