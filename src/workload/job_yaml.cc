#include "workload/job_yaml.h"
