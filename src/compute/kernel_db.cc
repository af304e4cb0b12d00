#include "compute/kernel_db.h"
