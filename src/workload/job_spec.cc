#include "workload/job_spec.h"
