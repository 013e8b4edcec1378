// core includes only the public API.
#include "bertrt/status.h"
