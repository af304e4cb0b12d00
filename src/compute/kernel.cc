#include "compute/kernel.h"
