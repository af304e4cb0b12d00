#include "workload/model_stats.h"
