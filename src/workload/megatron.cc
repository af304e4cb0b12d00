#include "workload/megatron.h"
